//! Kind-specific rules, as the Kubernetes registry strategies apply them:
//! typed decoding, defaults, allocation, and which fields create and update
//! may set.

pub(crate) mod csr;
pub(crate) mod event;
mod lease;
mod node;
mod pod;
mod rbac;
mod secret;
pub(crate) mod service;
mod webhook;

use k8s_openapi::api::{
    admissionregistration, certificates, coordination, core::v1 as core, discovery, events,
    rbac::v1 as rbac_v1,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::meta;
use crate::resources::Kind;
use crate::status::ApiError;

pub(crate) use service::ServiceIndex;

fn roundtrip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, serde_json::Error> {
    let typed = T::deserialize(value)?;
    serde_json::to_value(typed)
}

/// Decodes `value` as the Kubernetes type of `kind` and encodes it again, as
/// the API server does: unknown fields are dropped and wrong types rejected.
pub(crate) fn normalize(kind: Kind, value: &Value) -> Result<Value, serde_json::Error> {
    match kind {
        Kind::Namespace => roundtrip::<core::Namespace>(value),
        Kind::Node => roundtrip::<core::Node>(value),
        Kind::Service => service::normalize(value),
        Kind::Endpoints => roundtrip::<core::Endpoints>(value),
        Kind::ConfigMap => roundtrip::<core::ConfigMap>(value),
        Kind::Secret => roundtrip::<core::Secret>(value),
        Kind::Event => roundtrip::<core::Event>(value),
        Kind::Pod => roundtrip::<core::Pod>(value),
        Kind::PersistentVolume => roundtrip::<core::PersistentVolume>(value),
        Kind::Lease => roundtrip::<coordination::v1::Lease>(value),
        Kind::EventV1 => roundtrip::<events::v1::Event>(value),
        Kind::EndpointSlice => roundtrip::<discovery::v1::EndpointSlice>(value),
        Kind::ServiceAccount => roundtrip::<core::ServiceAccount>(value),
        Kind::Role => roundtrip::<rbac_v1::Role>(value),
        Kind::ClusterRole => roundtrip::<rbac_v1::ClusterRole>(value),
        Kind::RoleBinding => roundtrip::<rbac_v1::RoleBinding>(value),
        Kind::ClusterRoleBinding => roundtrip::<rbac_v1::ClusterRoleBinding>(value),
        Kind::CertificateSigningRequest => {
            roundtrip::<certificates::v1::CertificateSigningRequest>(value)
        }
        Kind::ValidatingWebhookConfiguration => {
            roundtrip::<admissionregistration::v1::ValidatingWebhookConfiguration>(value)
        }
    }
}

/// The fields of `input` that decoding dropped, as Kubernetes names them
/// (`spec.foo`, `spec.ports[0].bar`), sorted: the order does not depend on
/// whether serde_json keeps maps in document order (its `preserve_order`
/// feature, which other crates in a build may turn on).
pub(crate) fn unknown_fields(input: &Value, decoded: &Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_unknown(input, decoded, "", &mut found);
    found.sort();
    found
}

fn collect_unknown(input: &Value, decoded: &Value, path: &str, found: &mut Vec<String>) {
    match (input, decoded) {
        (Value::Object(i), Value::Object(d)) => {
            for (key, value) in i {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match d.get(key) {
                    None if !value.is_null() => found.push(here),
                    Some(inner) => collect_unknown(value, inner, &here, found),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(d)) => {
            for (n, (a, b)) in i.iter().zip(d).enumerate() {
                collect_unknown(a, b, &format!("{path}[{n}]"), found);
            }
        }
        _ => {}
    }
}

/// Whether `metadata.generation` is kept (1 on create): on Pods (since
/// 1.33), EndpointSlices and ValidatingWebhookConfigurations; none of the
/// other kinds served here track it.
pub(crate) fn tracks_generation(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Pod | Kind::EndpointSlice | Kind::ValidatingWebhookConfiguration
    )
}

/// Whether updating `old` to `next` bumps `metadata.generation`: a change of
/// a Pod's spec; of anything outside an EndpointSlice's metadata (it has no
/// spec), or of its labels or annotations; of a webhook configuration's
/// webhooks; as their registry strategies do (pinned by the contract suite
/// against kube-apiserver).
pub(crate) fn bumps_generation(kind: Kind, old: &Value, next: &Value) -> bool {
    let metadata_field =
        |obj: &Value, field: &str| obj.get("metadata").and_then(|m| m.get(field)).cloned();
    match kind {
        Kind::Pod => meta::top(next, "spec") != meta::top(old, "spec"),
        Kind::ValidatingWebhookConfiguration => {
            meta::top(next, "webhooks") != meta::top(old, "webhooks")
        }
        Kind::EndpointSlice => {
            outside_metadata(old) != outside_metadata(next)
                || ["labels", "annotations"]
                    .iter()
                    .any(|f| metadata_field(old, f) != metadata_field(next, f))
        }
        _ => false,
    }
}

/// Whether a completed DELETE answers with the object rather than a `Status`.
pub(crate) fn returns_deleted_object(kind: Kind) -> bool {
    matches!(kind, Kind::Pod | Kind::Service | Kind::Namespace)
}

/// Whether PUT may leave out `metadata.resourceVersion` (the registry
/// strategy's `AllowUnconditionalUpdate`): every kind served but the
/// webhook configurations.
pub(crate) fn allows_unconditional_update(kind: Kind) -> bool {
    kind != Kind::ValidatingWebhookConfiguration
}

/// Whether PUT of a missing object creates it.
pub(crate) fn allows_create_on_update(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Service | Kind::Endpoints | Kind::Event | Kind::EventV1
    )
}

/// The object's top-level fields but `metadata`.
fn outside_metadata(obj: &Value) -> Option<Vec<(&String, &Value)>> {
    let fields = obj.as_object()?;
    Some(
        fields
            .iter()
            .filter(|(key, _)| key.as_str() != "metadata")
            .collect(),
    )
}

/// Defaults and status a new object gets.
///
/// # Errors
///
/// 422 when the object breaks a rule Kubernetes enforces at this step
/// (a Service's nodePort already allocated).
pub(crate) fn prepare_create(
    kind: Kind,
    obj: &mut Value,
    services: &ServiceIndex,
) -> Result<(), ApiError> {
    validate(kind, obj)?;
    match kind {
        Kind::Namespace => {
            set_path(obj, &["spec", "finalizers"], json!(["kubernetes"]));
            meta::set_top(obj, "status", json!({"phase": "Active"}));
        }
        Kind::Service => {
            service::prepare(obj, None, services)
                .map_err(|causes| invalid(obj, "Service", &causes))?;
            meta::set_top(obj, "status", json!({"loadBalancer": {}}));
        }
        Kind::Pod => {
            let qos = pod::qos_class(obj);
            meta::set_top(obj, "status", json!({"phase": "Pending", "qosClass": qos}));
        }
        Kind::PersistentVolume => meta::set_top(obj, "status", json!({"phase": "Pending"})),
        Kind::Secret => secret::prepare(obj),
        Kind::Role | Kind::ClusterRole | Kind::RoleBinding | Kind::ClusterRoleBinding => {
            rbac::prepare(kind, obj, None)?;
        }
        Kind::CertificateSigningRequest => csr::prepare_create(obj)?,
        _ => {}
    }
    Ok(())
}

/// What an update of the main resource may not change, restored from `old`.
///
/// # Errors
///
/// 422 for changes Kubernetes forbids (a node's pod CIDRs once set, a
/// Service's cluster IP).
pub(crate) fn prepare_update(
    kind: Kind,
    has_status: bool,
    new: &mut Value,
    old: &Value,
    services: &ServiceIndex,
) -> Result<(), ApiError> {
    if has_status {
        meta::set_top(new, "status", meta::top(old, "status").clone());
    }
    validate(kind, new)?;
    match kind {
        Kind::Namespace => {
            let finalizers = old
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(Value::Null);
            set_path(new, &["spec", "finalizers"], finalizers);
        }
        Kind::Node => {
            // `validate` synced the pod CIDRs.
            let before = old.pointer("/spec/podCIDRs");
            if before.is_some_and(|b| b.as_array().is_some_and(|a| !a.is_empty()))
                && new.pointer("/spec/podCIDRs") != before
            {
                return Err(invalid(
                    new,
                    "Node",
                    &[(
                        "spec.podCIDRs".into(),
                        "Forbidden: node updates may not change podCIDR except from \"\" to valid"
                            .into(),
                    )],
                ));
            }
        }
        Kind::Service => {
            service::prepare(new, Some(old), services)
                .map_err(|causes| invalid(new, "Service", &causes))?;
        }
        Kind::Secret => secret::prepare(new),
        Kind::Role | Kind::ClusterRole | Kind::RoleBinding | Kind::ClusterRoleBinding => {
            rbac::prepare(kind, new, Some(old))?;
        }
        Kind::CertificateSigningRequest => csr::prepare_update(new, old),
        _ => {}
    }
    Ok(())
}

/// What a `/status` write may not change, restored from `old`: the spec,
/// and for Pods their owner references (kube-apiserver's status strategies).
pub(crate) fn prepare_status_update(kind: Kind, new: &mut Value, old: &Value) {
    meta::set_top(new, "spec", meta::top(old, "spec").clone());
    match kind {
        Kind::Pod => meta::copy(new, old, "ownerReferences"),
        Kind::CertificateSigningRequest => csr::prepare_status_update(new, old),
        _ => {}
    }
}

/// The checks kube-apiserver makes of any object's metadata, and of a
/// Node's (its pod CIDR fields synced first), a Lease's spec or a webhook
/// configuration's (defaulted) webhooks.
fn validate(kind: Kind, obj: &mut Value) -> Result<(), ApiError> {
    match kind {
        Kind::Node => sync_pod_cidrs(obj),
        Kind::ValidatingWebhookConfiguration => webhook::set_defaults(obj),
        _ => {}
    }
    let mut causes = crate::validation::metadata::check(obj);
    match kind {
        Kind::Node => causes.extend(node::check(obj)),
        Kind::Lease => causes.extend(lease::check(obj)),
        Kind::ValidatingWebhookConfiguration => causes.extend(webhook::check(obj)),
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let rt = crate::resources::by_kind(kind);
        Err(ApiError::invalid(
            rt.kind,
            rt.group,
            meta::name(obj).unwrap_or(""),
            &causes,
        ))
    }
}

fn invalid(obj: &Value, kind: &str, causes: &[(String, String)]) -> ApiError {
    ApiError::invalid(kind, "", meta::name(obj).unwrap_or(""), causes)
}

/// `spec.podCIDR` and `spec.podCIDRs` describe one thing; the v1 conversion
/// fills each from the other.
fn sync_pod_cidrs(obj: &mut Value) {
    let single = obj
        .pointer("/spec/podCIDR")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let first = obj
        .pointer("/spec/podCIDRs/0")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match (single, first) {
        (Some(cidr), None) => set_path(obj, &["spec", "podCIDRs"], json!([cidr])),
        (None, Some(cidr)) => set_path(obj, &["spec", "podCIDR"], json!(cidr)),
        _ => {}
    }
}

/// Sets a nested field, creating maps on the way; `Null` removes it.
pub(crate) fn set_path(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = obj;
    for key in parents {
        if !here.is_object() {
            *here = json!({});
        }
        let Some(map) = here.as_object_mut() else {
            return;
        };
        here = map.entry(key.to_string()).or_insert_with(|| json!({}));
    }
    if !here.is_object() {
        *here = json!({});
    }
    if let Some(map) = here.as_object_mut() {
        if value.is_null() {
            map.remove(*last);
        } else {
            map.insert(last.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizing_drops_unknown_fields_and_reports_them() {
        let input = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "bogus": 1}, "data": {"k": "v"}, "extra": true});
        let out = normalize(Kind::ConfigMap, &input).expect("decodes");
        assert_eq!(out.get("extra"), None);
        assert_eq!(unknown_fields(&input, &out), ["extra", "metadata.bogus"]);
    }

    #[test]
    fn wrong_types_and_kinds_do_not_decode() {
        assert!(
            normalize(
                Kind::ConfigMap,
                &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {}})
            )
            .is_err()
        );
        assert!(
            normalize(
                Kind::Node,
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": 5}})
            )
            .is_err()
        );
    }

    #[test]
    fn node_pod_cidr_fields_fill_each_other() {
        let mut node = json!({"spec": {"podCIDR": "10.244.1.0/24"}});
        sync_pod_cidrs(&mut node);
        assert_eq!(node["spec"]["podCIDRs"], json!(["10.244.1.0/24"]));
    }

    #[test]
    fn updates_keep_status_and_namespace_finalizers() {
        let old = json!({"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let mut new = json!({"spec": {}, "status": {"phase": "Terminating"}});
        prepare_update(
            Kind::Namespace,
            true,
            &mut new,
            &old,
            &ServiceIndex::default(),
        )
        .expect("allowed");
        assert_eq!(new, old);
    }
}
