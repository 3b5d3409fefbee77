//! kube-apiserver's RBAC authorizer over the stored Roles, ClusterRoles
//! and their bindings: ClusterRoleBindings grant everywhere, RoleBindings
//! only in their namespace; rules match verbs, API groups, resources (with
//! subresources), resource names and non-resource URLs. No aggregation.

use serde_json::Value;

use super::attributes::Attributes;
use crate::resources::{Kind, by_kind};
use crate::store::Store;
use crate::user::UserInfo;

/// An authorizer's answer, with kube-apiserver's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    /// `RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "u"`;
    /// empty for a denial without errors.
    pub(crate) reason: String,
}

/// The strings of a string-list field of `value` (missing: none).
fn strings<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = &'a str> {
    value
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

/// Whether `rule` (a PolicyRule) allows the request: rbac's `RuleAllows`.
pub(crate) fn rule_allows(attrs: &Attributes, rule: &Value) -> bool {
    let has = |field: &str, wanted: &str| strings(rule, field).any(|v| v == "*" || v == wanted);
    if !has("verbs", &attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return strings(rule, "nonResourceURLs").any(|url| {
            url == "*"
                || url == attrs.path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| attrs.path.starts_with(prefix))
        });
    }
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_matches = strings(rule, "resources").any(|r| {
        r == "*"
            || r == combined
            || (!attrs.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    let mut names = strings(rule, "resourceNames").peekable();
    let name_matches = names.peek().is_none() || names.any(|n| n == attrs.name);
    has("apiGroups", &attrs.group) && resource_matches && name_matches
}

/// Whether `subject` of a binding in `namespace` ("" for a
/// ClusterRoleBinding) names `user`: rbac's `appliesToUser`.
fn applies_to(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let name = text(subject, "name");
    match text(subject, "kind") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = match text(subject, "namespace") {
                "" => namespace,
                ns => ns,
            };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// How kube-apiserver describes a subject in a reason.
fn describe_subject(subject: &Value, namespace: &str) -> String {
    let (kind, name) = (text(subject, "kind"), text(subject, "name"));
    if kind == "ServiceAccount" {
        let ns = match text(subject, "namespace") {
            "" => namespace,
            ns => ns,
        };
        format!("{kind} \"{name}/{ns}\"")
    } else {
        format!("{kind} \"{name}\"")
    }
}

/// Decides `attrs` for `user` from the RBAC objects in `store`.
pub(crate) fn authorize(store: &Store, user: &UserInfo, attrs: &Attributes) -> Decision {
    let mut errors = Vec::new();
    let cluster_roles = by_kind(Kind::ClusterRole).storage;
    let rules_of = |role_ref: &Value, namespace: &str, errors: &mut Vec<String>| {
        let (kind, name) = (text(role_ref, "kind"), text(role_ref, "name"));
        let (storage, ns, what) = match kind {
            "ClusterRole" => (cluster_roles, "", "clusterrole"),
            "Role" if !namespace.is_empty() => (by_kind(Kind::Role).storage, namespace, "role"),
            _ => {
                errors.push(format!("unsupported role reference kind: {kind:?}"));
                return None;
            }
        };
        let found = store.get(storage, &(ns.to_owned(), name.to_owned()));
        if found.is_none() {
            errors.push(format!(
                "{what}.rbac.authorization.k8s.io \"{name}\" not found"
            ));
        }
        found.map(|role| &role.value)
    };
    // ClusterRoleBindings first, then the request namespace's RoleBindings,
    // as kube-apiserver visits them.
    let cluster_bindings = store
        .objects(by_kind(Kind::ClusterRoleBinding).storage, None)
        .map(|(_, b)| ("ClusterRoleBinding", &b.value));
    let namespace = (!attrs.namespace.is_empty()).then_some(attrs.namespace.as_str());
    let role_bindings = namespace.into_iter().flat_map(|ns| {
        store
            .objects(by_kind(Kind::RoleBinding).storage, Some(ns))
            .map(|(_, b)| ("RoleBinding", &b.value))
    });
    for (binding_kind, binding) in cluster_bindings.chain(role_bindings) {
        let namespace = binding
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(subject) = binding
            .get("subjects")
            .and_then(Value::as_array)
            .and_then(|subjects| subjects.iter().find(|s| applies_to(user, s, namespace)))
        else {
            continue;
        };
        let role_ref = binding.get("roleRef").unwrap_or(&Value::Null);
        let Some(role) = rules_of(role_ref, namespace, &mut errors) else {
            continue;
        };
        let allowed = role
            .get("rules")
            .and_then(Value::as_array)
            .is_some_and(|rules| rules.iter().any(|rule| rule_allows(attrs, rule)));
        if allowed {
            let name = binding
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let shown = if namespace.is_empty() {
                name.to_owned()
            } else {
                format!("{name}/{namespace}")
            };
            return Decision {
                allowed: true,
                reason: format!(
                    "RBAC: allowed by {binding_kind} \"{shown}\" of {} \"{}\" to {}",
                    text(role_ref, "kind"),
                    text(role_ref, "name"),
                    describe_subject(subject, namespace)
                ),
            };
        }
    }
    // 1.37 names the authorizer before its reason ("rbac: RBAC: ..."); 1.35
    // and 1.36 do not.
    let reason = match errors.as_slice() {
        [] => String::new(),
        [one] => format!("rbac: RBAC: {one}"),
        many => format!("rbac: RBAC: [{}]", many.join(", ")),
    };
    Decision {
        allowed: false,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn resource(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule =
            json!({"verbs": ["patch", "update"], "apiGroups": [""], "resources": ["nodes/status"]});
        assert!(rule_allows(
            &resource("patch", "", "nodes", "status", "n"),
            &rule
        ));
        assert!(!rule_allows(
            &resource("patch", "", "nodes", "", "n"),
            &rule
        ));
        assert!(!rule_allows(
            &resource("get", "", "nodes", "status", "n"),
            &rule
        ));
        assert!(!rule_allows(
            &resource("patch", "apps", "nodes", "status", "n"),
            &rule
        ));
        let star = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]});
        assert!(rule_allows(
            &resource("update", "x", "things", "status", ""),
            &star
        ));
        assert!(!rule_allows(
            &resource("update", "x", "things", "", ""),
            &star
        ));
        let named = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]});
        assert!(rule_allows(
            &resource("get", "", "configmaps", "", "a"),
            &named
        ));
        assert!(!rule_allows(
            &resource("get", "", "configmaps", "", "b"),
            &named
        ));
        assert!(!rule_allows(
            &resource("list", "", "configmaps", "", ""),
            &named
        ));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_trailing_star() {
        let rule = json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]});
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Attributes::default()
        };
        assert!(rule_allows(&path("/healthz"), &rule));
        assert!(rule_allows(&path("/apis/x/v1"), &rule));
        assert!(!rule_allows(&path("/healthz/etcd"), &rule));
        assert!(!rule_allows(&path("/api"), &rule));
    }

    #[test]
    fn service_account_subjects_default_to_the_binding_namespace() {
        let user = UserInfo {
            name: "system:serviceaccount:kube-system:ccm".into(),
            ..UserInfo::default()
        };
        let subject = json!({"kind": "ServiceAccount", "name": "ccm"});
        assert!(applies_to(&user, &subject, "kube-system"));
        assert!(!applies_to(&user, &subject, "default"));
        assert!(!applies_to(&user, &subject, ""));
        assert_eq!(
            describe_subject(&subject, "kube-system"),
            "ServiceAccount \"ccm/kube-system\""
        );
    }
}
