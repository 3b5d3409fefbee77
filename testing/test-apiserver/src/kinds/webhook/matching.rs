//! What a webhook is sent: its rules (`validateRuleWithOperations`) and its
//! namespace and object selectors (`ValidateLabelSelector`), checked in
//! kube-apiserver's words.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Cause, items, strings, text};
use crate::validation::bad_value;
use crate::validation::metadata::{label_value_problem, qualified_name_problems};
use crate::validation::not_supported;

const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];

fn has_wildcard(values: &[String]) -> bool {
    values.iter().any(|v| v == "*")
}

/// One rule: operations, API groups and versions, resources and scope.
pub(super) fn rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let operations = strings(rule, "operations");
    if operations.is_empty() {
        causes.push((format!("{at}.operations"), "Required value".into()));
    }
    if operations.len() > 1 && has_wildcard(&operations) {
        causes.push((
            format!("{at}.operations"),
            format!(
                "Invalid value: {}: if '*' is present, must not specify other operations",
                bad_value::strings(&operations)
            ),
        ));
    }
    for (n, operation) in operations.iter().enumerate() {
        if !OPERATIONS.contains(&operation.as_str()) {
            causes.push((
                format!("{at}.operations[{n}]"),
                not_supported(operation, OPERATIONS),
            ));
        }
    }
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = strings(rule, field);
        if values.is_empty() {
            causes.push((format!("{at}.{field}"), "Required value".into()));
        }
        if values.len() > 1 && has_wildcard(&values) {
            causes.push((
                format!("{at}.{field}"),
                format!(
                    "Invalid value: {}: if '*' is present, must not specify other {what}",
                    bad_value::strings(&values)
                ),
            ));
        }
        // The core group is "": only versions may not be empty.
        if field == "apiVersions" {
            for (n, _) in values.iter().enumerate().filter(|(_, v)| v.is_empty()) {
                causes.push((format!("{at}.{field}[{n}]"), "Required value".into()));
            }
        }
    }
    resources(
        &strings(rule, "resources"),
        &format!("{at}.resources"),
        causes,
    );
    if let Some(scope) = rule.get("scope").and_then(Value::as_str)
        && !SCOPES.contains(&scope)
    {
        causes.push((format!("{at}.scope"), not_supported(scope, SCOPES)));
    }
}

/// `validateResources`: subresources allowed, wildcards not overlapping.
fn resources(list: &[String], at: &str, causes: &mut Vec<Cause>) {
    if list.is_empty() {
        causes.push((at.to_owned(), "Required value".into()));
    }
    // `x/*` seen, and `*/x` seen.
    let mut any_subresource_of = BTreeSet::new();
    let mut subresource_of_any = BTreeSet::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    // As in Go, the last entry without a subresource decides.
    let mut resource_without_subresource = false;
    for (n, entry) in list.iter().enumerate() {
        if entry.is_empty() {
            causes.push((format!("{at}[{n}]"), "Required value".into()));
            continue;
        }
        double_wildcard |= entry == "*/*";
        single_wildcard |= entry == "*";
        let Some((resource, sub)) = entry.split_once('/') else {
            resource_without_subresource = entry != "*";
            continue;
        };
        if any_subresource_of.contains(resource) {
            causes.push((
                format!("{at}[{n}]"),
                format!("Invalid value: {entry:?}: if '{resource}/*' is present, must not specify {entry}"),
            ));
        }
        if subresource_of_any.contains(sub) {
            causes.push((
                format!("{at}[{n}]"),
                format!(
                    "Invalid value: {entry:?}: if '*/{sub}' is present, must not specify {entry}"
                ),
            ));
        }
        if sub == "*" {
            any_subresource_of.insert(resource);
        }
        if resource == "*" {
            subresource_of_any.insert(sub);
        }
    }
    if list.len() > 1 && double_wildcard {
        causes.push((
            at.to_owned(),
            format!(
                "Invalid value: {}: if '*/*' is present, must not specify other resources",
                bad_value::strings(list)
            ),
        ));
    }
    if single_wildcard && resource_without_subresource {
        causes.push((
            at.to_owned(),
            format!(
                "Invalid value: {}: if '*' is present, must not specify other resources without subresources",
                bad_value::strings(list)
            ),
        ));
    }
}

/// A label selector's keys, values and operators.
pub(super) fn label_selector(selector: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        let field = format!("{at}.matchLabels");
        for (key, value) in labels {
            for problem in qualified_name_problems(key) {
                causes.push((field.clone(), format!("Invalid value: {key:?}: {problem}")));
            }
            let value = value.as_str().unwrap_or_default();
            if let Some(problem) = label_value_problem(value) {
                causes.push((
                    field.clone(),
                    format!("Invalid value: {value:?}: {problem}"),
                ));
            }
        }
    }
    for (n, requirement) in items(selector, "matchExpressions").iter().enumerate() {
        let here = format!("{at}.matchExpressions[{n}]");
        let values = strings(requirement, "values");
        match text(requirement, "operator") {
            "In" | "NotIn" if values.is_empty() => causes.push((
                format!("{here}.values"),
                "Required value: must be specified when `operator` is 'In' or 'NotIn'".into(),
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => causes.push((
                format!("{here}.values"),
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    .into(),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => causes.push((
                format!("{here}.operator"),
                format!("Invalid value: {other:?}: not a valid selector operator"),
            )),
        }
        let key = text(requirement, "key");
        for problem in qualified_name_problems(key) {
            causes.push((
                format!("{here}.key"),
                format!("Invalid value: {key:?}: {problem}"),
            ));
        }
        for (m, value) in values.iter().enumerate() {
            if let Some(problem) = label_value_problem(value) {
                causes.push((
                    format!("{here}.values[{m}]"),
                    format!("Invalid value: {value:?}: {problem}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule_causes(value: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        rule(value, "r", &mut causes);
        causes
    }

    #[test]
    fn an_empty_rule_lacks_operations_groups_versions_and_resources() {
        let fields: Vec<String> = rule_causes(&json!({}))
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "r.operations",
                "r.apiGroups",
                "r.apiVersions",
                "r.resources"
            ]
        );
    }

    #[test]
    fn wildcards_stand_alone_and_unknown_values_are_refused() {
        let causes = rule_causes(&json!({
            "operations": ["*", "PATCH"], "apiGroups": ["*", "apps"], "apiVersions": ["v1"],
            "resources": ["*", "pods"], "scope": "Everywhere",
        }));
        assert_eq!(
            causes,
            [
                (
                    "r.operations".to_owned(),
                    "Invalid value: [\"*\",\"PATCH\"]: if '*' is present, must not specify other operations".to_owned()
                ),
                (
                    "r.operations[1]".to_owned(),
                    "Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"".to_owned()
                ),
                (
                    "r.apiGroups".to_owned(),
                    "Invalid value: [\"*\",\"apps\"]: if '*' is present, must not specify other API groups".to_owned()
                ),
                (
                    "r.resources".to_owned(),
                    "Invalid value: [\"*\",\"pods\"]: if '*' is present, must not specify other resources without subresources".to_owned()
                ),
                (
                    "r.scope".to_owned(),
                    "Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn subresource_wildcards_may_not_overlap() {
        let mut causes = Vec::new();
        resources(
            &["pods/*".into(), "pods/log".into(), "*/*".into()],
            "r",
            &mut causes,
        );
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(
            causes[0].1,
            "Invalid value: \"pods/log\": if 'pods/*' is present, must not specify pods/log"
        );
        assert!(causes[1].1.contains("if '*/*' is present"));
    }

    #[test]
    fn selectors_need_known_operators_and_values_that_fit_them() {
        let mut causes = Vec::new();
        label_selector(
            &json!({"matchLabels": {"ok": "bad value!"}, "matchExpressions": [
                {"key": "a", "operator": "In"},
                {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c", "operator": "Near", "values": ["x"]},
            ]}),
            "s",
            &mut causes,
        );
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "s.matchLabels",
                "s.matchExpressions[0].values",
                "s.matchExpressions[1].values",
                "s.matchExpressions[2].operator"
            ]
        );
        assert!(causes[2].1.starts_with("Forbidden: "));
    }
}
