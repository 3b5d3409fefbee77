//! kube-apiserver's printers, kind by kind: the columns `kubectl get` shows
//! (wide ones at priority 1) and how each cell is worked out from the
//! object. Cells are read from the storage representation (core/v1 for both
//! Event APIs, as kube-apiserver prints both from its internal Event).

mod cluster;
mod network;
mod workloads;

use serde_json::Value;

use super::Column;
use super::age;
use crate::resources::Kind;

/// The `Name` column every printer starts with.
pub(super) const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "The object's name, unique within its namespace.",
};

/// The `Age` column: time since creation.
pub(super) const AGE: Column = Column {
    name: "Age",
    kind: "string",
    format: "",
    priority: 0,
    description: "How long ago the object was created.",
};

/// A column of `kind` at `priority`.
pub(super) const fn col(
    name: &'static str,
    kind: &'static str,
    priority: u8,
    description: &'static str,
) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority,
        description,
    }
}

/// The columns of `kind`'s printer.
pub(super) fn columns(kind: Kind) -> &'static [Column] {
    match kind {
        Kind::Node => cluster::NODE,
        Kind::Namespace => cluster::NAMESPACE,
        Kind::PersistentVolume => cluster::PERSISTENT_VOLUME,
        Kind::Lease => cluster::LEASE,
        Kind::Role | Kind::ClusterRole => cluster::ROLE,
        Kind::RoleBinding | Kind::ClusterRoleBinding => cluster::ROLE_BINDING,
        Kind::CertificateSigningRequest => cluster::CSR,
        Kind::ValidatingWebhookConfiguration => cluster::WEBHOOK_CONFIGURATION,
        Kind::Service => network::SERVICE,
        Kind::Endpoints => network::ENDPOINTS,
        Kind::EndpointSlice => network::ENDPOINT_SLICE,
        Kind::Pod => workloads::POD,
        Kind::ConfigMap => workloads::CONFIG_MAP,
        Kind::Secret => workloads::SECRET,
        Kind::ServiceAccount => workloads::SERVICE_ACCOUNT,
        Kind::Event | Kind::EventV1 => workloads::EVENT,
    }
}

/// The cells of `stored` under `kind`'s printer, at `now`.
pub(super) fn cells(kind: Kind, stored: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let cells = match kind {
        Kind::Node => cluster::node(stored, now),
        Kind::Namespace => cluster::namespace(stored, now),
        Kind::PersistentVolume => cluster::persistent_volume(stored, now),
        Kind::Lease => cluster::lease(stored, now),
        Kind::Role | Kind::ClusterRole => cluster::role(stored),
        Kind::RoleBinding | Kind::ClusterRoleBinding => cluster::role_binding(stored, now),
        Kind::CertificateSigningRequest => cluster::csr(stored, now),
        Kind::ValidatingWebhookConfiguration => cluster::webhook_configuration(stored, now),
        Kind::Service => network::service(stored, now),
        Kind::Endpoints => network::endpoints(stored, now),
        Kind::EndpointSlice => network::endpoint_slice(stored, now),
        Kind::Pod => workloads::pod(stored, now),
        Kind::ConfigMap => workloads::config_map(stored, now),
        Kind::Secret => workloads::secret(stored, now),
        Kind::ServiceAccount => workloads::service_account(stored, now),
        Kind::Event | Kind::EventV1 => workloads::event(stored, now),
    };
    debug_assert_eq!(cells.len(), columns(kind).len());
    cells
}

/// The string at `pointer`, or "".
pub(super) fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The string at `pointer`, or `fallback` when absent or empty.
pub(super) fn text_or(v: &Value, pointer: &str, fallback: &str) -> Value {
    match text(v, pointer) {
        "" => Value::from(fallback),
        s => Value::from(s),
    }
}

/// The array at `pointer`, or an empty one.
pub(super) fn items<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// How many entries the object at `pointer` has.
pub(super) fn entries(v: &Value, pointer: &str) -> usize {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

pub(super) fn name(v: &Value) -> Value {
    Value::from(text(v, "/metadata/name"))
}

pub(super) fn age_of(v: &Value, now: jiff::Timestamp) -> Value {
    Value::from(age::since(
        v.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now,
    ))
}

/// `items` joined with `sep`, or `empty` when there are none.
pub(super) fn join_or(items: &[String], sep: &str, empty: &str) -> Value {
    if items.is_empty() {
        Value::from(empty)
    } else {
        Value::from(items.join(sep))
    }
}

/// `k=v` pairs sorted by key and joined with commas (`labels.FormatLabels`),
/// `<none>` when empty.
pub(super) fn format_labels(v: Option<&Value>) -> Value {
    let Some(map) = v.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return Value::from("<none>");
    };
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    Value::from(pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all_kinds() -> [Kind; 19] {
        [
            Kind::Namespace,
            Kind::Node,
            Kind::Service,
            Kind::Endpoints,
            Kind::ConfigMap,
            Kind::Secret,
            Kind::Event,
            Kind::Pod,
            Kind::PersistentVolume,
            Kind::Lease,
            Kind::EventV1,
            Kind::EndpointSlice,
            Kind::ServiceAccount,
            Kind::Role,
            Kind::ClusterRole,
            Kind::RoleBinding,
            Kind::ClusterRoleBinding,
            Kind::CertificateSigningRequest,
            Kind::ValidatingWebhookConfiguration,
        ]
    }

    #[test]
    fn every_kind_prints_as_many_cells_as_it_has_columns_even_from_an_empty_object() {
        let now = jiff::Timestamp::now();
        for kind in all_kinds() {
            let empty = json!({ "metadata": { "name": "x" } });
            assert_eq!(
                cells(kind, &empty, now).len(),
                columns(kind).len(),
                "{kind:?}"
            );
            let names: Vec<&str> = columns(kind).iter().map(|c| c.name).collect();
            assert!(names.contains(&"Name"), "{kind:?}: {names:?}");
        }
    }

    #[test]
    fn labels_print_sorted_or_as_none() {
        assert_eq!(format_labels(None), "<none>");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
        assert_eq!(
            format_labels(Some(&json!({ "b": "2", "a": "1" }))),
            "a=1,b=2"
        );
    }
}
