//! OpenAPI v3, as kube-apiserver publishes it: `/openapi/v3` lists a
//! document per group-version, and each document has the paths of its
//! resources (every PATCH, PUT and POST taking `fieldValidation`, with the
//! kind in `x-kubernetes-group-version-kind`) and the schemas of their
//! kinds. The schemas are generated from the k8s-openapi types the server
//! decodes bodies into (their `schemars` implementations), not written by
//! hand. That is what `kubectl apply` looks for before it lets the server
//! validate fields (`fieldValidation=Strict`), and what `kubectl explain`
//! reads.

pub(crate) mod v2;

use std::sync::OnceLock;

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::resources::{self, GROUPS, Kind, ResourceType};

/// The groups and versions served: the core group first.
fn group_versions() -> impl Iterator<Item = (&'static str, &'static str)> {
    std::iter::once(("", "v1")).chain(GROUPS.iter().map(|g| (*g, "v1")))
}

/// `api/v1` or `apis/<group>/<version>`: a document's key in the root.
fn key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A group-version's document, and the digest its URL carries (clients
/// cache by it).
struct Document {
    group: &'static str,
    version: &'static str,
    body: Value,
    hash: String,
}

/// Every document, built once.
fn documents() -> &'static [Document] {
    static DOCS: OnceLock<Vec<Document>> = OnceLock::new();
    DOCS.get_or_init(|| {
        group_versions()
            .map(|(group, version)| {
                let body = build(group, version);
                let hash = fingerprint(&body);
                Document {
                    group,
                    version,
                    body,
                    hash,
                }
            })
            .collect()
    })
}

/// `/openapi/v3`: where each group-version's document is.
pub(crate) fn root() -> Value {
    let paths: Map<String, Value> = documents()
        .iter()
        .map(|doc| {
            let key = key(doc.group, doc.version);
            let url =
                json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={}", doc.hash) });
            (key, url)
        })
        .collect();
    json!({ "paths": paths })
}

/// A stable digest of a document.
fn fingerprint(doc: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    doc.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The document of `group`/`version`, if served.
pub(crate) fn document(group: &str, version: &str) -> Option<Value> {
    documents()
        .iter()
        .find(|doc| doc.group == group && doc.version == version)
        .map(|doc| doc.body.clone())
}

/// The schema name of `kind`'s type, after adding its schema (and every
/// schema it refers to) to `generator`.
fn add_kind(generator: &mut SchemaGenerator, kind: Kind) -> String {
    use k8s_openapi::api::{
        admissionregistration, certificates, coordination, core, discovery, events, rbac,
    };
    fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
        generator.subschema_for::<T>();
        T::schema_name().into_owned()
    }
    match kind {
        Kind::Namespace => add::<core::v1::Namespace>(generator),
        Kind::Node => add::<core::v1::Node>(generator),
        Kind::Service => add::<core::v1::Service>(generator),
        Kind::Endpoints => add::<core::v1::Endpoints>(generator),
        Kind::ConfigMap => add::<core::v1::ConfigMap>(generator),
        Kind::Secret => add::<core::v1::Secret>(generator),
        Kind::Event => add::<core::v1::Event>(generator),
        Kind::Pod => add::<core::v1::Pod>(generator),
        Kind::PersistentVolume => add::<core::v1::PersistentVolume>(generator),
        Kind::ServiceAccount => add::<core::v1::ServiceAccount>(generator),
        Kind::Lease => add::<coordination::v1::Lease>(generator),
        Kind::EventV1 => add::<events::v1::Event>(generator),
        Kind::EndpointSlice => add::<discovery::v1::EndpointSlice>(generator),
        Kind::Role => add::<rbac::v1::Role>(generator),
        Kind::ClusterRole => add::<rbac::v1::ClusterRole>(generator),
        Kind::RoleBinding => add::<rbac::v1::RoleBinding>(generator),
        Kind::ClusterRoleBinding => add::<rbac::v1::ClusterRoleBinding>(generator),
        Kind::CertificateSigningRequest => {
            add::<certificates::v1::CertificateSigningRequest>(generator)
        }
        Kind::ValidatingWebhookConfiguration => {
            add::<admissionregistration::v1::ValidatingWebhookConfiguration>(generator)
        }
    }
}

fn gvk(rt: &ResourceType) -> Value {
    json!({ "group": rt.group, "version": rt.version, "kind": rt.kind })
}

fn query(name: &str, description: &str) -> Value {
    json!({ "name": name, "in": "query", "description": description, "schema": { "type": "string", "uniqueItems": true } })
}

/// One operation on `rt`, with the kind and, for writes, the parameters
/// that say the server validates fields.
fn operation(rt: &ResourceType, action: &str, id: &str, writes: bool, schema: &str) -> Value {
    let mut parameters = vec![query("pretty", "Pretty-print the output.")];
    if writes {
        parameters.push(query(
            "dryRun",
            "When present, modifications are not persisted: All processes the request.",
        ));
        parameters.push(query(
            "fieldManager",
            "The name of the actor making the change.",
        ));
        parameters.push(query(
            "fieldValidation",
            "How to handle unknown or duplicate fields: Ignore, Warn or Strict.",
        ));
    }
    let reference = json!({ "$ref": format!("#/components/schemas/{schema}") });
    let mut op = json!({
        "operationId": id,
        "parameters": parameters,
        "responses": { "200": { "description": "OK", "content": { "application/json": { "schema": reference } } } },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(rt),
    });
    if writes && action != "patch" {
        op["requestBody"] =
            json!({ "content": { "*/*": { "schema": reference } }, "required": true });
    }
    op
}

/// The document of one group-version: its resources' paths and schemas.
fn build(group: &str, version: &str) -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut paths = Map::new();
    let mut kinds = Vec::new();
    for rt in resources::in_group_version(group, version) {
        let schema = add_kind(&mut generator, rt.kind_id);
        kinds.push((rt, schema.clone()));
        let base = format!("/{}", key(group, version));
        let collection = if rt.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{base}/{}", rt.plural)
        };
        let id = |verb: &str| format!("{verb}{}", rt.kind);
        paths.insert(
            collection.clone(),
            json!({
                "get": operation(rt, "list", &id("list"), false, &schema),
                "post": operation(rt, "post", &id("create"), true, &schema),
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation(rt, "get", &id("read"), false, &schema),
                "put": operation(rt, "put", &id("replace"), true, &schema),
                "patch": operation(rt, "patch", &id("patch"), true, &schema),
                "delete": operation(rt, "delete", &id("delete"), false, &schema),
            }),
        );
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    for (rt, name) in kinds {
        if let Some(schema) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(rt)]));
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.37.0" },
        "paths": paths,
        "components": { "schemas": schemas },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_lists_a_document_per_group_version_and_each_names_its_kinds() {
        let root = root();
        let url = root["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="), "{url}");
        assert!(root["paths"]["apis/coordination.k8s.io/v1"].is_object());

        let core = document("", "v1").unwrap();
        let patch = &core["paths"]["/api/v1/namespaces/{namespace}/services/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Service");
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
        );
        let service = &core["components"]["schemas"]["io.k8s.api.core.v1.Service"];
        assert_eq!(
            service["x-kubernetes-group-version-kind"][0]["kind"],
            "Service"
        );
        assert!(
            core["components"]["schemas"]["io.k8s.api.core.v1.ServiceSpec"]["properties"]["type"]
                ["description"]
                .as_str()
                .is_some_and(|d| d.contains("LoadBalancer"))
        );
        assert!(document("apps", "v1").is_none());
    }
}
