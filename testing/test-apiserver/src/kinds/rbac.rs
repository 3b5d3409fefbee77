//! Roles, ClusterRoles and their bindings: the v1 defaults (API groups of
//! a binding's roleRef and subjects) and kube-apiserver's validation, with
//! its wording; a binding's roleRef cannot change.

use serde_json::{Value, json};

use crate::meta;
use crate::resources::{Kind, RBAC_GROUP};
use crate::status::ApiError;
use crate::validation::{self, bad_value, not_supported};

/// `(field, message)` of one refusal.
type Cause = (String, String);

fn strings(value: &Value, field: &str) -> Vec<String> {
    value
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

/// Defaults, validates and (for an update from `old`) checks what may not
/// change.
///
/// # Errors
///
/// 422 Invalid with kube-apiserver's causes.
pub(super) fn prepare(kind: Kind, obj: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    match kind {
        Kind::Role | Kind::ClusterRole => rules(obj, kind == Kind::Role, &mut causes),
        Kind::RoleBinding | Kind::ClusterRoleBinding => {
            set_binding_defaults(obj);
            binding(obj, kind == Kind::RoleBinding, &mut causes);
            if let Some(old) = old
                && obj.get("roleRef") != old.get("roleRef")
            {
                let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
                causes.push((
                    "roleRef".into(),
                    // 1.37's words (1.35 and 1.36 end "cannot change roleRef").
                    format!(
                        "Invalid value: {}: field is immutable",
                        bad_value::internal_struct(&[
                            ("APIGroup", Value::from(text(role_ref, "apiGroup"))),
                            ("Kind", Value::from(text(role_ref, "kind"))),
                            ("Name", Value::from(text(role_ref, "name"))),
                        ])
                    ),
                ));
            }
        }
        _ => {}
    }
    if causes.is_empty() {
        return Ok(());
    }
    let plain = match kind {
        Kind::Role => "Role",
        Kind::ClusterRole => "ClusterRole",
        Kind::RoleBinding => "RoleBinding",
        _ => "ClusterRoleBinding",
    };
    let name = meta::name(obj).unwrap_or("");
    let mut err = ApiError::invalid(&format!("{plain}.{RBAC_GROUP}"), RBAC_GROUP, name, &causes);
    if let Some(details) = err.details.as_mut() {
        details["kind"] = json!(plain);
    }
    Err(err)
}

/// `roleRef.apiGroup` and the subjects' `apiGroup`, as v1 defaults them.
fn set_binding_defaults(obj: &mut Value) {
    if let Some(role_ref) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
        && role_ref
            .get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
    {
        role_ref.insert("apiGroup".into(), json!(RBAC_GROUP));
    }
    let subjects = obj.get_mut("subjects").and_then(Value::as_array_mut);
    for subject in subjects.into_iter().flatten() {
        let Some(subject) = subject.as_object_mut() else {
            continue;
        };
        let group = match subject.get("kind").and_then(Value::as_str) {
            Some("User" | "Group") => RBAC_GROUP,
            _ => "",
        };
        if subject
            .get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
            && !group.is_empty()
        {
            subject.insert("apiGroup".into(), json!(group));
        }
    }
}

fn rules(obj: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let rules = obj.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("rules[{i}].{field}");
        if strings(rule, "verbs").is_empty() {
            // 1.37's words; 1.35 and 1.36 add ": verbs must contain at
            // least one value".
            causes.push((at("verbs"), "Required value".into()));
        }
        let urls = strings(rule, "nonResourceURLs");
        if !urls.is_empty() {
            if namespaced {
                causes.push((
                    at("nonResourceURLs"),
                    format!(
                        "Invalid value: {}: namespaced rules cannot apply to non-resource URLs",
                        bad_value::strings(&urls)
                    ),
                ));
            }
            let resource_fields = ["apiGroups", "resources", "resourceNames"];
            if resource_fields.iter().any(|f| !strings(rule, f).is_empty()) {
                causes.push((
                    at("nonResourceURLs"),
                    format!(
                        "Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
                        bad_value::strings(&urls)
                    ),
                ));
            }
            continue;
        }
        if strings(rule, "apiGroups").is_empty() {
            causes.push((
                at("apiGroups"),
                "Required value: resource rules must supply at least one api group".into(),
            ));
        }
        if strings(rule, "resources").is_empty() {
            causes.push((
                at("resources"),
                "Required value: resource rules must supply at least one resource".into(),
            ));
        }
    }
}

fn binding(obj: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    let group = text(role_ref, "apiGroup");
    if group != RBAC_GROUP {
        causes.push((
            "roleRef.apiGroup".into(),
            not_supported(group, &[RBAC_GROUP]),
        ));
    }
    let kind = text(role_ref, "kind");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        causes.push(("roleRef.kind".into(), not_supported(kind, kinds)));
    }
    match text(role_ref, "name") {
        "" => causes.push(("roleRef.name".into(), "Required value".into())),
        name => {
            if let Err(why) = validation::validate_path_segment(name) {
                causes.push(("roleRef.name".into(), why));
            }
        }
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("subjects[{i}].{field}");
        let name = text(subject, "name");
        if name.is_empty() {
            causes.push((at("name"), "Required value".into()));
        }
        let group = text(subject, "apiGroup");
        match text(subject, "kind") {
            "ServiceAccount" => {
                if !name.is_empty() && !validation::is_dns_subdomain(name) {
                    causes.push((
                        at("name"),
                        format!(
                            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case \
                             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                        ),
                    ));
                }
                if !group.is_empty() {
                    causes.push((at("apiGroup"), not_supported(group, &[""])));
                }
                if !namespaced && text(subject, "namespace").is_empty() {
                    causes.push((at("namespace"), "Required value".into()));
                }
            }
            "User" | "Group" => {
                if group != RBAC_GROUP {
                    causes.push((at("apiGroup"), not_supported(group, &[RBAC_GROUP])));
                }
            }
            other => causes.push((
                at("kind"),
                not_supported(other, &["ServiceAccount", "User", "Group"]),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(kind: Kind, mut obj: Value) -> String {
        prepare(kind, &mut obj, None)
            .map(|()| String::new())
            .unwrap_or_else(|e| e.message)
    }

    #[test]
    fn rules_need_verbs_and_either_resources_or_urls() {
        assert_eq!(
            refusal(
                Kind::ClusterRole,
                json!({"metadata": {"name": "v4"}, "rules": [
                {"verbs": ["get"], "nonResourceURLs": ["/x"], "apiGroups": [""], "resources": ["pods"]}]})
            ),
            "ClusterRole.rbac.authorization.k8s.io \"v4\" is invalid: rules[0].nonResourceURLs: Invalid value: [\"/x\"]: rules cannot apply to both regular resources and non-resource URLs"
        );
        assert_eq!(
            refusal(
                Kind::Role,
                json!({"metadata": {"name": "v5"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]})
            ),
            "Role.rbac.authorization.k8s.io \"v5\" is invalid: rules[0].nonResourceURLs: Invalid value: [\"/x\"]: namespaced rules cannot apply to non-resource URLs"
        );
        assert_eq!(
            refusal(
                Kind::ClusterRole,
                json!({"rules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]})
            ),
            ""
        );
    }

    #[test]
    fn bindings_are_defaulted_then_validated() {
        let mut ok = json!({"roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "sa"}]});
        prepare(Kind::RoleBinding, &mut ok, None).expect("valid");
        assert_eq!(ok["roleRef"]["apiGroup"], RBAC_GROUP);
        assert_eq!(ok["subjects"][0]["apiGroup"], RBAC_GROUP);
        assert_eq!(ok["subjects"][1].get("apiGroup"), None);
        assert_eq!(
            refusal(
                Kind::ClusterRoleBinding,
                json!({"metadata": {"name": "b1"}, "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "x"}, "subjects": [{"kind": "ServiceAccount", "name": "a"}]})
            ),
            "ClusterRoleBinding.rbac.authorization.k8s.io \"b1\" is invalid: [roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]"
        );
        assert_eq!(
            refusal(
                Kind::RoleBinding,
                json!({"metadata": {"name": "b3"}, "roleRef": {"apiGroup": "wrong", "kind": "Role", "name": ""}, "subjects": [{"kind": "User", "name": ""}]})
            ),
            "RoleBinding.rbac.authorization.k8s.io \"b3\" is invalid: [roleRef.apiGroup: Unsupported value: \"wrong\": supported values: \"rbac.authorization.k8s.io\", roleRef.name: Required value, subjects[0].name: Required value]"
        );
    }
}
