//! `metadata.labels` and `metadata.annotations` as kube-apiserver's
//! `ValidateObjectMeta` checks them: qualified-name keys, label values, and
//! the annotations' total size. The words are kube-apiserver's.

use serde_json::Value;

/// The most bytes a label's name part or value may have.
const MAX_LABEL: usize = 63;
/// The most bytes a key's prefix (a DNS subdomain) may have.
const MAX_PREFIX: usize = 253;
/// The most bytes all annotations together (keys and values) may have.
const MAX_ANNOTATIONS: usize = 256 * 1024;

const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', \
and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric \
characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
'MyValue',  or 'my_value',  or '12345', regex used for validation is \
'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn is_name_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// What is wrong with `key` as a qualified name (`[prefix/]name`), in
/// kube-apiserver's words: nothing, or one problem per line it would print.
pub(crate) fn qualified_name_problems(key: &str) -> Vec<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let mut problems = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            problems.push("prefix part must be non-empty".into());
        } else if prefix.len() > MAX_PREFIX || !super::is_dns_subdomain(prefix) {
            problems.push(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                 alphanumeric characters, '-' or '.', and must start and end with an \
                 alphanumeric character (e.g. 'example.com', regex used for validation is \
                 '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                    .into(),
            );
        }
    }
    if name.is_empty() {
        problems.push("name part must be non-empty".into());
    } else if name.len() > MAX_LABEL {
        problems.push(format!("name part must be no more than {MAX_LABEL} bytes"));
    }
    if !is_name_chars(name) {
        problems.push(NAME_PART.to_owned());
    }
    problems
}

/// What is wrong with `value` as a label value, in kube-apiserver's words.
pub(crate) fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        None
    } else if value.len() > MAX_LABEL {
        Some(format!("must be no more than {MAX_LABEL} bytes"))
    } else {
        (!is_name_chars(value)).then(|| LABEL_VALUE.to_owned())
    }
}

/// Every problem with `obj`'s labels and annotations, as `(field, message)`.
pub(crate) fn check(obj: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            for problem in qualified_name_problems(key) {
                causes.push((
                    "metadata.labels".into(),
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
            let value = value.as_str().unwrap_or_default();
            if let Some(problem) = label_value_problem(value) {
                causes.push((
                    "metadata.labels".into(),
                    format!("Invalid value: {value:?}: {problem}"),
                ));
            }
        }
    }
    if let Some(annotations) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let mut size = 0;
        for (key, value) in annotations {
            for problem in qualified_name_problems(&key.to_ascii_lowercase()) {
                causes.push((
                    "metadata.annotations".into(),
                    format!("Invalid value: {key:?}: {problem}"),
                ));
            }
            size += key.len() + value.as_str().map_or(0, str::len);
        }
        if size > MAX_ANNOTATIONS {
            causes.push((
                "metadata.annotations".into(),
                format!("Too long: may not be more than {MAX_ANNOTATIONS} bytes"),
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_qualified_names_and_values_label_values() {
        assert!(qualified_name_problems("app").is_empty());
        assert!(qualified_name_problems("node-role.kubernetes.io/worker").is_empty());
        let empty = qualified_name_problems("example.com/");
        assert_eq!(empty.len(), 2, "kube-apiserver says both: {empty:?}");
        assert_eq!(empty[0], "name part must be non-empty");
        assert!(qualified_name_problems("bad key!")[0].starts_with("name part must consist"));
        assert!(qualified_name_problems("Upper.Case/x")[0].starts_with("prefix part"));
        assert_eq!(
            qualified_name_problems(&"a".repeat(64)),
            ["name part must be no more than 63 bytes"]
        );
        let obj = json!({ "metadata": {
            "labels": { "app": "bad value!", "ok": "", "fine": "v1.2_3-x" },
            "annotations": { "bad key!": "v", "Example.COM/Any": "anything at all!" },
        }});
        let causes = check(&obj);
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(causes[0].0, "metadata.labels");
        assert!(
            causes[0]
                .1
                .starts_with("Invalid value: \"bad value!\": a valid label")
        );
        assert_eq!(causes[1].0, "metadata.annotations");
    }

    #[test]
    fn annotations_together_are_bounded() {
        let obj = json!({ "metadata": { "annotations": { "a": "x".repeat(MAX_ANNOTATIONS) } } });
        assert_eq!(check(&obj).len(), 1);
    }
}
