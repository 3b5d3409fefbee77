//! ValidatingWebhookConfigurations (`admissionregistration.k8s.io/v1`): the
//! v1 defaults, and kube-apiserver's validation of each webhook in its
//! words. The webhooks are stored and served, never called; so the CEL of a
//! match condition is required but not compiled.
//!
//! An update is validated as a create: kube-apiserver relaxes a rule on
//! update only when the stored object already broke it, which an object
//! created here never does.

mod client_config;
mod matching;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::validation::{self, bad_value, not_supported};

/// `(field, message)` of one refusal.
type Cause = (String, String);

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
/// What a v1 webhook may declare (v1beta1's `Unknown` and `Some` are gone).
const SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
/// The AdmissionReview versions kube-apiserver sends.
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const MAX_MATCH_CONDITIONS: usize = 64;

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

fn items<'a>(value: &'a Value, field: &str) -> &'a [Value] {
    value
        .get(field)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn strings(value: &Value, field: &str) -> Vec<String> {
    items(value, field)
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The v1 defaults of every webhook (`SetDefaults_ValidatingWebhook`), its
/// rules' scope (`SetDefaults_Rule`) and its service's port
/// (`SetDefaults_ServiceReference`).
pub(super) fn set_defaults(obj: &mut Value) {
    let webhooks = obj.get_mut("webhooks").and_then(Value::as_array_mut);
    for hook in webhooks.into_iter().flatten() {
        let Some(hook) = hook.as_object_mut() else {
            continue;
        };
        for (field, default) in [
            ("failurePolicy", json!("Fail")),
            ("matchPolicy", json!("Equivalent")),
            ("namespaceSelector", json!({})),
            ("objectSelector", json!({})),
            ("timeoutSeconds", json!(10)),
        ] {
            hook.entry(field).or_insert(default);
        }
        let rules = hook.get_mut("rules").and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            rule.entry("scope").or_insert(json!("*"));
        }
        if let Some(service) = hook
            .get_mut("clientConfig")
            .and_then(|config| config.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            service.entry("port").or_insert(json!(443));
        }
    }
}

/// Every problem with the (defaulted) webhooks of `obj`, in the order
/// kube-apiserver lists them.
pub(super) fn check(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = BTreeSet::new();
    for (i, hook) in items(obj, "webhooks").iter().enumerate() {
        let at = format!("webhooks[{i}]");
        check_webhook(hook, &at, &mut causes);
        review_versions(hook, &format!("{at}.admissionReviewVersions"), &mut causes);
        let name = text(hook, "name");
        if !name.is_empty() && !names.insert(name) {
            causes.push((format!("{at}.name"), format!("Duplicate value: {name:?}")));
        }
    }
    causes
}

fn check_webhook(hook: &Value, at: &str, causes: &mut Vec<Cause>) {
    fully_qualified_name(text(hook, "name"), &format!("{at}.name"), causes);
    for (n, rule) in items(hook, "rules").iter().enumerate() {
        matching::rule(rule, &format!("{at}.rules[{n}]"), causes);
    }
    for (field, supported) in [
        ("failurePolicy", FAILURE_POLICIES),
        ("matchPolicy", MATCH_POLICIES),
    ] {
        if let Some(value) = hook.get(field).and_then(Value::as_str)
            && !supported.contains(&value)
        {
            causes.push((format!("{at}.{field}"), not_supported(value, supported)));
        }
    }
    // Decoding cannot tell a missing `sideEffects` from an empty one (the
    // k8s-openapi field is a plain string): both are reported as missing.
    match text(hook, "sideEffects") {
        "" => causes.push((
            format!("{at}.sideEffects"),
            format!(
                "Required value: must specify one of {}",
                SIDE_EFFECTS.join(", ")
            ),
        )),
        given if !SIDE_EFFECTS.contains(&given) => causes.push((
            format!("{at}.sideEffects"),
            not_supported(given, SIDE_EFFECTS),
        )),
        _ => {}
    }
    if let Some(timeout) = hook.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&timeout)
    {
        causes.push((
            format!("{at}.timeoutSeconds"),
            format!("Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds"),
        ));
    }
    for field in ["namespaceSelector", "objectSelector"] {
        if let Some(selector) = hook.get(field) {
            matching::label_selector(selector, &format!("{at}.{field}"), causes);
        }
    }
    client_config::check(
        hook.get("clientConfig").unwrap_or(&Value::Null),
        &format!("{at}.clientConfig"),
        causes,
    );
    match_conditions(
        items(hook, "matchConditions"),
        &format!("{at}.matchConditions"),
        causes,
    );
}

/// `IsFullyQualifiedName`: a DNS subdomain of at least three labels.
fn fully_qualified_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        causes.push((at.to_owned(), "Required value".into()));
        return;
    }
    let problems = validation::dns_subdomain_problems(name);
    if !problems.is_empty() {
        causes.push((
            at.to_owned(),
            format!("Invalid value: {name:?}: {}", problems.join(",")),
        ));
    } else if name.split('.').count() < 3 {
        causes.push((
            at.to_owned(),
            format!(
                "Invalid value: {name:?}: should be a domain with at least three segments separated by dots"
            ),
        ));
    }
}

fn review_versions(hook: &Value, at: &str, causes: &mut Vec<Cause>) {
    let versions = strings(hook, "admissionReviewVersions");
    if versions.is_empty() {
        causes.push((
            at.to_owned(),
            format!(
                "Required value: must specify one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
        return;
    }
    let mut seen = BTreeSet::new();
    for (n, version) in versions.iter().enumerate() {
        if !seen.insert(version) {
            causes.push((
                format!("{at}[{n}]"),
                format!("Invalid value: {version:?}: duplicate version"),
            ));
            continue;
        }
        for problem in validation::dns1035_label_problems(version) {
            causes.push((
                format!("{at}[{n}]"),
                format!("Invalid value: {version:?}: {problem}"),
            ));
        }
    }
    if !versions
        .iter()
        .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    {
        causes.push((
            at.to_owned(),
            format!(
                "Invalid value: {}: must include at least one of {}",
                bad_value::strings(&versions),
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// Names and expressions present, names unique; the CEL is not compiled.
fn match_conditions(conditions: &[Value], at: &str, causes: &mut Vec<Cause>) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        causes.push((
            at.to_owned(),
            format!(
                "Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items",
                conditions.len()
            ),
        ));
    }
    let mut names = BTreeSet::new();
    for (n, condition) in conditions.iter().enumerate() {
        let here = format!("{at}[{n}]");
        if text(condition, "expression").trim().is_empty() {
            causes.push((format!("{here}.expression"), "Required value".into()));
        }
        let name = text(condition, "name");
        if name.is_empty() {
            causes.push((format!("{here}.name"), "Required value".into()));
            continue;
        }
        for problem in validation::metadata::qualified_name_problems(name) {
            causes.push((
                format!("{here}.name"),
                format!("Invalid value: {name:?}: {problem}"),
            ));
        }
        if !names.insert(name) {
            causes.push((format!("{here}.name"), format!("Duplicate value: {name:?}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configuration(hook: &Value) -> Value {
        json!({"metadata": {"name": "c"}, "webhooks": [hook]})
    }

    fn valid_hook() -> Value {
        json!({
            "name": "check.example.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}],
        })
    }

    fn causes_of(hook: &Value) -> Vec<Cause> {
        let mut obj = configuration(hook);
        set_defaults(&mut obj);
        check(&obj)
    }

    #[test]
    fn defaults_fill_what_v1_defaults() {
        let mut obj = configuration(&valid_hook());
        set_defaults(&mut obj);
        let hook = &obj["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(hook["namespaceSelector"], json!({}));
        assert_eq!(hook["objectSelector"], json!({}));
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        assert!(check(&obj).is_empty(), "{:?}", check(&obj));
    }

    #[test]
    fn given_values_are_kept_over_defaults() {
        let mut hook = valid_hook();
        hook["failurePolicy"] = json!("Ignore");
        hook["timeoutSeconds"] = json!(5);
        hook["clientConfig"]["service"]["port"] = json!(8443);
        let mut obj = configuration(&hook);
        set_defaults(&mut obj);
        assert_eq!(obj["webhooks"][0]["failurePolicy"], "Ignore");
        assert_eq!(obj["webhooks"][0]["timeoutSeconds"], 5);
        assert_eq!(obj["webhooks"][0]["clientConfig"]["service"]["port"], 8443);
    }

    #[test]
    fn names_need_three_labels_and_to_be_unique() {
        let mut short = valid_hook();
        short["name"] = json!("example.com");
        assert_eq!(
            causes_of(&short),
            [(
                "webhooks[0].name".to_owned(),
                "Invalid value: \"example.com\": should be a domain with at least three segments separated by dots".to_owned()
            )]
        );
        let mut upper = valid_hook();
        upper["name"] = json!("Check.example.com");
        assert!(causes_of(&upper)[0].1.contains("RFC 1123 subdomain"));
        let mut obj = json!({"webhooks": [valid_hook(), valid_hook()]});
        set_defaults(&mut obj);
        assert_eq!(
            check(&obj),
            [(
                "webhooks[1].name".to_owned(),
                "Duplicate value: \"check.example.com\"".to_owned()
            )]
        );
    }

    #[test]
    fn side_effects_review_versions_policies_and_timeout_are_checked() {
        let mut hook = valid_hook();
        hook["sideEffects"] = json!("Some");
        hook["admissionReviewVersions"] = json!(["v2"]);
        hook["failurePolicy"] = json!("Never");
        hook["timeoutSeconds"] = json!(31);
        let causes = causes_of(&hook);
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "webhooks[0].failurePolicy",
                "webhooks[0].sideEffects",
                "webhooks[0].timeoutSeconds",
                "webhooks[0].admissionReviewVersions"
            ]
        );
        assert_eq!(
            causes[1].1,
            "Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\""
        );
        assert_eq!(
            causes[3].1,
            "Invalid value: [\"v2\"]: must include at least one of v1, v1beta1"
        );
        let mut bare = valid_hook();
        if let Some(fields) = bare.as_object_mut() {
            fields.remove("sideEffects");
            fields.remove("admissionReviewVersions");
        }
        assert_eq!(
            causes_of(&bare),
            [
                (
                    "webhooks[0].sideEffects".to_owned(),
                    "Required value: must specify one of None, NoneOnDryRun".to_owned()
                ),
                (
                    "webhooks[0].admissionReviewVersions".to_owned(),
                    "Required value: must specify one of v1, v1beta1".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn match_conditions_need_names_and_expressions() {
        let mut hook = valid_hook();
        hook["matchConditions"] = json!([
            {"name": "lb", "expression": "true"},
            {"name": "lb", "expression": " "},
            {"name": "", "expression": "true"},
        ]);
        let causes = causes_of(&hook);
        assert_eq!(
            causes,
            [
                (
                    "webhooks[0].matchConditions[1].expression".to_owned(),
                    "Required value".to_owned()
                ),
                (
                    "webhooks[0].matchConditions[1].name".to_owned(),
                    "Duplicate value: \"lb\"".to_owned()
                ),
                (
                    "webhooks[0].matchConditions[2].name".to_owned(),
                    "Required value".to_owned()
                ),
            ]
        );
    }
}
