//! OpenAPI v2 (`/openapi/v2`): one Swagger 2.0 document for every served
//! group-version, made from the v3 documents (so from the same k8s-openapi
//! schemas): definitions for component schemas, a `body` parameter for a
//! request body, a response's `schema` for its content. kube-apiserver
//! answers it as JSON or, to client-go (kubectl), as gnostic's protobuf
//! ([`proto`]); so does this server.

mod proto;

use std::sync::OnceLock;

use hyper::body::Bytes;
use serde_json::{Map, Value, json};

use super::super::render::ranges;
use super::{document, group_versions};
use crate::status::ApiError;

/// The protobuf media types client-go may ask for; kube-apiserver answers
/// with the second (Go's MIME parser refuses the first's `@`).
const PROTOBUF: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The document, as JSON and as protobuf, built once.
fn built() -> &'static (Bytes, Bytes) {
    static DOC: OnceLock<(Bytes, Bytes)> = OnceLock::new();
    DOC.get_or_init(|| {
        let doc = build();
        let json = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        let protobuf = Bytes::from(proto::encode(&doc));
        (json, protobuf)
    })
}

/// `/openapi/v2` in the first encoding `accept` takes: the body and its
/// media type.
///
/// # Errors
///
/// 406 when `accept` takes neither JSON nor gnostic's protobuf.
pub(crate) fn body(accept: Option<&str>) -> Result<(Bytes, &'static str), ApiError> {
    let (json, protobuf) = built();
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok((json.clone(), "application/json"));
    };
    for (media, _) in ranges(accept) {
        if PROTOBUF.contains(&media.as_str()) {
            return Ok((protobuf.clone(), PROTOBUF[1]));
        }
        if matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
            return Ok((json.clone(), "application/json"));
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, {} (got {accept:?})",
        PROTOBUF[0]
    )))
}

/// A v3 reference (`#/components/schemas/X`) as v2's (`#/definitions/X`),
/// everywhere in `value`; a property that is `allOf` one reference as that
/// reference beside its description (as kube-apiserver's v2 writes it, and
/// kubectl's v2 reader follows); `x-kubernetes-int-or-string` as v2 writes it.
fn to_v2_schema(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            if let Some([only]) = map
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                && only.get("$ref").is_some()
            {
                let mut flat = map.clone();
                flat.remove("allOf");
                flat.insert("$ref".into(), only["$ref"].clone());
                return to_v2_schema(&Value::Object(flat));
            }
            if map.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
                let mut out = json!({ "type": "string", "format": "int-or-string" });
                if let Some(d) = map.get("description") {
                    out["description"] = d.clone();
                }
                return out;
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => (
                            k.clone(),
                            Value::String(r.replace("#/components/schemas/", "#/definitions/")),
                        ),
                        _ => (k.clone(), to_v2_schema(v)),
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(to_v2_schema).collect()),
        other => other.clone(),
    }
}

/// A v3 operation as v2's.
fn to_v2_operation(op: &Value) -> Value {
    let mut parameters: Vec<Value> = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let mut parameter = json!({
                "name": p["name"],
                "in": p["in"],
                "description": p["description"],
                "type": p["schema"]["type"],
            });
            if p["schema"]["uniqueItems"] == json!(true) {
                parameter["uniqueItems"] = json!(true);
            }
            parameter
        })
        .collect();
    if let Some(schema) = op["requestBody"]["content"]["*/*"].get("schema") {
        parameters.push(json!({
            "name": "body",
            "in": "body",
            "required": true,
            "schema": to_v2_schema(schema),
        }));
    }
    let responses: Map<String, Value> = op["responses"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(code, r)| {
            let mut response = json!({ "description": r["description"] });
            if let Some(schema) = r["content"]["application/json"].get("schema") {
                response["schema"] = to_v2_schema(schema);
            }
            (code.clone(), response)
        })
        .collect();
    let mut out = json!({
        "operationId": op["operationId"],
        "consumes": ["*/*"],
        "produces": ["application/json", "application/vnd.kubernetes.protobuf"],
        "schemes": ["https"],
        "parameters": parameters,
        "responses": responses,
    });
    for key in ["x-kubernetes-action", "x-kubernetes-group-version-kind"] {
        if let Some(v) = op.get(key) {
            out[key] = v.clone();
        }
    }
    out
}

fn build() -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for (group, version) in group_versions() {
        let Some(doc) = document(group, version) else {
            continue;
        };
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            let item: Map<String, Value> = item
                .as_object()
                .into_iter()
                .flatten()
                .map(|(method, op)| (method.clone(), to_v2_operation(op)))
                .collect();
            paths.insert(path.clone(), Value::Object(item));
        }
        for (name, schema) in doc["components"]["schemas"]
            .as_object()
            .into_iter()
            .flatten()
        {
            definitions.insert(name.clone(), to_v2_schema(schema));
        }
    }
    json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": "v1.37.0" },
        "paths": paths,
        "definitions": definitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_and_paths_are_swagger_2() {
        let doc: Value = serde_json::from_slice(&built().0).expect("JSON");
        assert_eq!(doc["swagger"], "2.0");
        let spec = &doc["definitions"]["io.k8s.api.core.v1.ServiceSpec"];
        assert_eq!(
            spec["properties"]["ports"]["items"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.ServicePort"
        );
        assert_eq!(
            doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"],
            "int-or-string"
        );
        let post = &doc["paths"]["/api/v1/namespaces/{namespace}/services"]["post"];
        let body = post["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["in"] == "body"))
            .expect("a body parameter");
        assert_eq!(
            body["schema"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.Service"
        );
        assert_eq!(post["x-kubernetes-group-version-kind"]["kind"], "Service");
        assert!(
            doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
                .is_object()
        );
        assert!(!doc.to_string().contains("#/components/"));
        assert_eq!(
            doc["definitions"]["io.k8s.api.core.v1.Service"]["properties"]["spec"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.ServiceSpec"
        );
    }

    #[test]
    fn the_encoding_follows_accept() {
        let json = body(Some("application/json")).expect("json");
        assert_eq!(json.1, "application/json");
        let pb = body(Some(&format!("{}, application/json", PROTOBUF[1]))).expect("protobuf");
        assert_eq!(pb.1, PROTOBUF[1]);
        assert_eq!(body(Some("text/html")).map_err(|e| e.code), Err(406));
    }
}
