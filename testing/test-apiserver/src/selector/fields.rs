//! Field selectors (`fieldSelector`): `metadata.name` and
//! `metadata.namespace` on every kind, and the fields Kubernetes' registry
//! makes selectable per kind (`spec.nodeName` on Pods, `involvedObject.*`
//! on Events...). Any other field is refused with 400.

use serde_json::Value;

use crate::meta;
use crate::resources::Kind;
use crate::status::ApiError;

/// `(field label, JSON pointer, value when absent)`, as the registries'
/// `GetAttrs`/`SelectableFields` define them; booleans read as Go prints them.
type Selectable = (&'static str, &'static str, &'static str);

const POD: &[Selectable] = &[
    ("spec.nodeName", "/spec/nodeName", ""),
    ("spec.restartPolicy", "/spec/restartPolicy", ""),
    ("spec.schedulerName", "/spec/schedulerName", ""),
    ("spec.serviceAccountName", "/spec/serviceAccountName", ""),
    ("spec.hostNetwork", "/spec/hostNetwork", "false"),
    ("status.phase", "/status/phase", ""),
    ("status.podIP", "/status/podIP", ""),
    ("status.nominatedNodeName", "/status/nominatedNodeName", ""),
];
const NODE: &[Selectable] = &[("spec.unschedulable", "/spec/unschedulable", "false")];
const EVENT: &[Selectable] = &[
    ("involvedObject.kind", "/involvedObject/kind", ""),
    ("involvedObject.namespace", "/involvedObject/namespace", ""),
    ("involvedObject.name", "/involvedObject/name", ""),
    ("involvedObject.uid", "/involvedObject/uid", ""),
    (
        "involvedObject.apiVersion",
        "/involvedObject/apiVersion",
        "",
    ),
    (
        "involvedObject.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    ("involvedObject.fieldPath", "/involvedObject/fieldPath", ""),
    ("reason", "/reason", ""),
    ("reportingComponent", "/reportingComponent", ""),
    ("source", "/source/component", ""),
    ("type", "/type", ""),
];
/// events.k8s.io/v1 names for the same stored (core/v1) fields.
const EVENT_V1: &[Selectable] = &[
    ("regarding.kind", "/involvedObject/kind", ""),
    ("regarding.namespace", "/involvedObject/namespace", ""),
    ("regarding.name", "/involvedObject/name", ""),
    ("regarding.uid", "/involvedObject/uid", ""),
    ("regarding.apiVersion", "/involvedObject/apiVersion", ""),
    (
        "regarding.resourceVersion",
        "/involvedObject/resourceVersion",
        "",
    ),
    ("regarding.fieldPath", "/involvedObject/fieldPath", ""),
    ("reason", "/reason", ""),
    ("reportingController", "/reportingComponent", ""),
    ("type", "/type", ""),
];
const SERVICE: &[Selectable] = &[
    ("spec.clusterIP", "/spec/clusterIP", ""),
    ("spec.type", "/spec/type", ""),
];
const SECRET: &[Selectable] = &[("type", "/type", "")];
const NAMESPACE: &[Selectable] = &[("status.phase", "/status/phase", "")];
const CSR: &[Selectable] = &[("spec.signerName", "/spec/signerName", "")];

/// The selectable fields of `kind` besides `metadata.name` and
/// `metadata.namespace`, or `None` for kinds without field-label conversion
/// functions of their own (kube-apiserver words their refusals
/// differently).
fn selectable(kind: Kind) -> Option<&'static [Selectable]> {
    match kind {
        Kind::Pod => Some(POD),
        Kind::Node => Some(NODE),
        Kind::Event => Some(EVENT),
        Kind::EventV1 => Some(EVENT_V1),
        Kind::Secret => Some(SECRET),
        Kind::Namespace => Some(NAMESPACE),
        Kind::Service => Some(SERVICE),
        Kind::CertificateSigningRequest => Some(CSR),
        Kind::Endpoints
        | Kind::ConfigMap
        | Kind::PersistentVolume
        | Kind::Lease
        | Kind::EndpointSlice
        | Kind::ServiceAccount
        | Kind::Role
        | Kind::ClusterRole
        | Kind::RoleBinding
        | Kind::ClusterRoleBinding
        | Kind::ValidatingWebhookConfiguration => None,
    }
}

/// kube-apiserver's refusal of a field `kind` does not select on.
fn unsupported(kind: Kind, label: &str) -> ApiError {
    ApiError::bad_request(if selectable(kind).is_some() {
        format!("field label not supported: {label}")
    } else {
        format!(
            "\"{label}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Name,
    Namespace,
    /// A kind's own field: its JSON pointer and its value when absent.
    At(&'static str, &'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    field: Field,
    value: String,
    equal: bool,
}

/// A parsed field selector; every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `fieldSelector`: `field=value`, `field==value`, `field!=value`,
    /// comma-separated, with `\,` `\=` `\\` escapes in values.
    ///
    /// # Errors
    ///
    /// 400 BadRequest for malformed selectors and fields `kind` does not select on.
    pub(crate) fn parse(text: &str, kind: Kind) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_unescaped(text, ',') {
            if term.trim().is_empty() {
                continue;
            }
            let (field, value, equal) = if let Some((f, v)) = split_once_unescaped(&term, "!=") {
                (f, v, false)
            } else if let Some((f, v)) = split_once_unescaped(&term, "==") {
                (f, v, true)
            } else if let Some((f, v)) = split_once_unescaped(&term, "=") {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                )));
            };
            let field = match field.trim() {
                "metadata.name" => Field::Name,
                "metadata.namespace" => Field::Namespace,
                label => match selectable(kind)
                    .unwrap_or_default()
                    .iter()
                    .find(|(l, _, _)| *l == label)
                {
                    Some((_, pointer, absent)) => Field::At(pointer, absent),
                    None => return Err(unsupported(kind, label)),
                },
            };
            requirements.push(FieldRequirement {
                field,
                value: unescape(&value),
                equal,
            });
        }
        Ok(Self { requirements })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `obj` is selected.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = match r.field {
                Field::Name => meta::name(obj).unwrap_or("").to_owned(),
                Field::Namespace => meta::namespace(obj).unwrap_or("").to_owned(),
                Field::At(pointer, absent) => match obj.pointer(pointer) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Bool(b)) => b.to_string(),
                    Some(Value::Null) | None => absent.to_owned(),
                    Some(other) => other.to_string(),
                },
            };
            (actual == r.value) == r.equal
        })
    }
}

/// Splits on `sep` where it is not escaped with a backslash.
fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    parts.push(current);
    parts
}

/// Splits at the first unescaped `op`.
fn split_once_unescaped(term: &str, op: &str) -> Option<(String, String)> {
    let mut escaped = false;
    for (i, c) in term.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if term[i..].starts_with(op) {
            return Some((term[..i].to_owned(), term[i + op.len()..].to_owned()));
        }
    }
    None
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selects_on_name_and_namespace() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let sel = FieldSelector::parse("metadata.name=a,metadata.namespace==ns", Kind::ConfigMap)
            .expect("valid");
        assert!(sel.matches(&obj));
        assert!(
            !FieldSelector::parse("metadata.name!=a", Kind::ConfigMap)
                .expect("valid")
                .matches(&obj)
        );
    }

    #[test]
    fn kinds_select_on_their_kubernetes_fields() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let on_n1 = FieldSelector::parse("spec.nodeName=n1,status.phase!=Succeeded", Kind::Pod)
            .expect("valid");
        assert!(on_n1.matches(&pod));
        let schedulable =
            FieldSelector::parse("spec.unschedulable=false", Kind::Node).expect("valid");
        assert!(
            schedulable.matches(&json!({"spec": {}})),
            "an absent bool reads as false"
        );
        assert!(!schedulable.matches(&json!({"spec": {"unschedulable": true}})));
        let about = FieldSelector::parse(
            "involvedObject.name=n1,involvedObject.kind=Node",
            Kind::Event,
        )
        .expect("valid");
        assert!(about.matches(&json!({"involvedObject": {"kind": "Node", "name": "n1"}})));
    }

    #[test]
    fn other_fields_are_refused_not_ignored() {
        let err = FieldSelector::parse("spec.nodeName=n1", Kind::Service).expect_err("unsupported");
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .contains("field label not supported: spec.nodeName"),
            "{}",
            err.message
        );
    }

    #[test]
    fn kinds_without_conversions_refuse_in_the_generic_words() {
        let err = FieldSelector::parse("spec.bogus=x", Kind::ConfigMap).expect_err("unsupported");
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "\"spec.bogus\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        let by_type =
            FieldSelector::parse("spec.type=LoadBalancer", Kind::Service).expect("selectable");
        assert!(by_type.matches(&json!({"spec": {"type": "LoadBalancer"}})));
        let about = FieldSelector::parse("regarding.name=n1", Kind::EventV1).expect("selectable");
        assert!(about.matches(&json!({"involvedObject": {"name": "n1"}})));
    }

    #[test]
    fn escaped_separators_stay_in_values() {
        let sel = FieldSelector::parse(r"metadata.name=a\,b", Kind::ConfigMap).expect("valid");
        assert!(sel.matches(&json!({"metadata": {"name": "a,b"}})));
    }
}
