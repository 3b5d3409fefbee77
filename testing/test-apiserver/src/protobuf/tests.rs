//! Every field of every kind written as protobuf reads back as it was
//! (examples built from the kinds' OpenAPI schemas), and what client-go
//! sends decodes to the JSON it means.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::*;

/// Every field the kind's OpenAPI schema (from k8s-openapi's types, as
/// `/openapi/v3` serves it) has, filled with a value that is not a zero.
fn example_of<T: JsonSchema>() -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let root = generator.subschema_for::<T>();
    let defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    fill(&serde_json::to_value(root).expect("schema"), &defs, 0)
}

fn fill(schema: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    assert!(depth < 64, "schema nests too deep: {schema}");
    if let Some(name) = schema.get("$ref").and_then(Value::as_str) {
        let name = name.rsplit('/').next().unwrap_or_default();
        return fill(&defs[name], defs, depth + 1);
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        return fill(&all[0], defs, depth + 1);
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        // IntOrString and Quantity.
        return json!("http");
    }
    let format = schema.get("format").and_then(Value::as_str);
    match (schema.get("type").and_then(Value::as_str), format) {
        (Some("string"), Some("date-time")) => json!("2026-11-27T01:02:03Z"),
        (Some("string"), Some("byte")) => json!("eA=="),
        (Some("string"), _) => json!("x"),
        (Some("integer"), _) => json!(7),
        (Some("number"), _) => json!(7),
        (Some("boolean"), _) => json!(true),
        (Some("array"), _) => json!([fill(&schema["items"], defs, depth + 1)]),
        _ => match (schema.get("properties"), schema.get("additionalProperties")) {
            (Some(Value::Object(properties)), _) => Value::Object(
                properties
                    .iter()
                    .map(|(name, s)| (name.clone(), fill(s, defs, depth + 1)))
                    .collect(),
            ),
            (_, Some(values @ Value::Object(_))) => json!({ "k": fill(values, defs, depth + 1) }),
            // Free-form JSON (managedFields' fieldsV1).
            _ => json!({ "f:x": {} }),
        },
    }
}

/// Two JSON values, equal but for how a time is written (`MicroTime` adds
/// six fractional digits); the first path where they differ otherwise.
fn difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let here = format!("{path}.{key}");
                let (Some(p), Some(q)) = (x.get(key), y.get(key)) else {
                    return Some(here);
                };
                if let Some(found) = difference(p, q, &here) {
                    return Some(found);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| difference(p, q, &format!("{path}[{i}]"))),
        (Value::String(x), Value::String(y)) => {
            let same_time = x.parse::<jiff::Timestamp>().ok().is_some()
                && x.parse::<jiff::Timestamp>().ok() == y.parse::<jiff::Timestamp>().ok();
            (x != y && !same_time).then(|| path.to_owned())
        }
        _ => (a != b).then(|| path.to_owned()),
    }
}

/// Through protobuf and back: JSON, message, bytes, message, JSON.
fn round_trip(value: &Value) -> Value {
    let body = to_protobuf(value)
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("a kind written as protobuf");
    assert!(body.starts_with(MAGIC));
    decode(&body).expect("decodes")
}

macro_rules! every_field_survives {
    ($($test:ident: $api_version:literal $kind:literal => $ty:ty;)*) => {$(
        #[test]
        fn $test() {
            let mut example = example_of::<$ty>();
            example["apiVersion"] = json!($api_version);
            example["kind"] = json!($kind);
            let back = round_trip(&example);
            assert_eq!(difference(&example, &back, ""), None, "{back:#}");
        }
    )*};
}

every_field_survives! {
    namespace: "v1" "Namespace" => k8s_openapi::api::core::v1::Namespace;
    node: "v1" "Node" => k8s_openapi::api::core::v1::Node;
    service: "v1" "Service" => k8s_openapi::api::core::v1::Service;
    endpoints: "v1" "Endpoints" => k8s_openapi::api::core::v1::Endpoints;
    config_map: "v1" "ConfigMap" => k8s_openapi::api::core::v1::ConfigMap;
    secret: "v1" "Secret" => k8s_openapi::api::core::v1::Secret;
    event: "v1" "Event" => k8s_openapi::api::core::v1::Event;
    pod: "v1" "Pod" => k8s_openapi::api::core::v1::Pod;
    persistent_volume: "v1" "PersistentVolume" => k8s_openapi::api::core::v1::PersistentVolume;
    service_account: "v1" "ServiceAccount" => k8s_openapi::api::core::v1::ServiceAccount;
    status: "v1" "Status" => k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
    lease: "coordination.k8s.io/v1" "Lease" => k8s_openapi::api::coordination::v1::Lease;
    event_v1: "events.k8s.io/v1" "Event" => k8s_openapi::api::events::v1::Event;
    endpoint_slice: "discovery.k8s.io/v1" "EndpointSlice" => k8s_openapi::api::discovery::v1::EndpointSlice;
    role: "rbac.authorization.k8s.io/v1" "Role" => k8s_openapi::api::rbac::v1::Role;
    cluster_role: "rbac.authorization.k8s.io/v1" "ClusterRole" => k8s_openapi::api::rbac::v1::ClusterRole;
    role_binding: "rbac.authorization.k8s.io/v1" "RoleBinding" => k8s_openapi::api::rbac::v1::RoleBinding;
    cluster_role_binding: "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" => k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    csr: "certificates.k8s.io/v1" "CertificateSigningRequest" => k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    validating_webhook_configuration: "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" => k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    token_review: "authentication.k8s.io/v1" "TokenReview" => k8s_openapi::api::authentication::v1::TokenReview;
    token_request: "authentication.k8s.io/v1" "TokenRequest" => k8s_openapi::api::authentication::v1::TokenRequest;
    self_subject_access_review: "authorization.k8s.io/v1" "SelfSubjectAccessReview" => k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    subject_access_review: "authorization.k8s.io/v1" "SubjectAccessReview" => k8s_openapi::api::authorization::v1::SubjectAccessReview;
}

/// What `kubectl create service loadbalancer web2 --tcp=80:8080` sends,
/// built with k8s-pb's messages as client-go builds it with Go's.
#[test]
fn kubectls_service_decodes_to_the_json_it_means() {
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    let service = core::v1::Service {
        metadata: Some(meta::ObjectMeta {
            name: Some("web2".into()),
            labels: [("app".to_owned(), "web2".to_owned())].into(),
            creation_timestamp: Some(meta::Time {
                seconds: Some(-62_135_596_800),
                nanos: Some(0),
            }),
            generate_name: Some(String::new()),
            ..Default::default()
        }),
        spec: Some(core::v1::ServiceSpec {
            ports: vec![core::v1::ServicePort {
                name: Some("80-8080".into()),
                protocol: Some("TCP".into()),
                port: Some(80),
                target_port: Some(IntOrString {
                    r#type: Some(0),
                    int_val: Some(8080),
                    str_val: Some(String::new()),
                }),
                node_port: Some(0),
                ..Default::default()
            }],
            selector: [("app".to_owned(), "web2".to_owned())].into(),
            r#type: Some("LoadBalancer".into()),
            cluster_ip: Some(String::new()),
            ..Default::default()
        }),
        status: Some(core::v1::ServiceStatus {
            load_balancer: Some(core::v1::LoadBalancerStatus::default()),
            ..Default::default()
        }),
    };
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Service".into()),
        }),
        raw: Some(service.encode_to_vec()),
        ..Default::default()
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    let decoded = decode(&body).expect("decodes");
    assert_eq!(
        decoded,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": { "name": "web2", "labels": { "app": "web2" } },
            "spec": {
                "ports": [{ "name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080 }],
                "selector": { "app": "web2" },
                "type": "LoadBalancer",
            },
            "status": { "loadBalancer": {} },
        })
    );
}

#[test]
fn bodies_that_are_not_kubernetes_protobuf_are_refused_with_400() {
    assert_eq!(decode(b"{}").map_err(|e| e.code), Err(400));
    assert_eq!(decode(b"k8s\0\xff\xff").map_err(|e| e.code), Err(400));
}

#[test]
fn kinds_not_served_are_refused_with_415() {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("apps/v1".into()),
            kind: Some("Deployment".into()),
        }),
        ..Default::default()
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    let err = decode(&body).expect_err("415");
    assert_eq!((err.code, err.reason), (415, "UnsupportedMediaType"));
}

#[test]
fn kinds_without_protobuf_stay_json() {
    assert_eq!(encode(br#"{"apiVersion":"v1","kind":"APIVersions"}"#), None);
    assert_eq!(encode(b"not json"), None);
}
