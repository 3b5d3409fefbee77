//! How kube-apiserver shows the value a field error refuses
//! (`field.Error.BadValue`): numbers and booleans bare, strings as Go's
//! `%q`, nothing as `null`, and lists and structs as JSON. Since 1.34 the
//! last are `json.Marshal`'s output (`["a","b"]`, `{"Key":"a"}`); 1.33
//! printed them as Go's `%#v` (`[]string{"a", "b"}`, `core.Taint{Key:"a"}`).

use serde_json::Value;

/// A string as Go's `%q` (`strconv.Quote`) shows it: printable characters
/// as they are, `\n`-style escapes, `\xNN` below space.
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `value` as Go's `json.Marshal` writes it: compact, with `<`, `>`, `&`
/// and the line and paragraph separators escaped (HTML-safe).
pub(crate) fn json(value: &Value) -> String {
    let plain = serde_json::to_string(value).unwrap_or_default();
    // These characters only ever appear inside strings, so replacing them
    // anywhere is safe.
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// A list of strings (`[]string`, or a list of a string type such as
/// `[]admissionregistration.OperationType`).
pub(crate) fn strings<S: AsRef<str>>(values: &[S]) -> String {
    json(&Value::from(
        values.iter().map(|v| v.as_ref()).collect::<Vec<_>>(),
    ))
}

/// A Go struct of kube-apiserver's internal types, which carry no `json`
/// tags: its fields under their Go names, in declaration order.
pub(crate) fn internal_struct(fields: &[(&str, Value)]) -> String {
    let members: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{}:{}", json(&Value::from(*name)), json(value)))
        .collect();
    format!("{{{}}}", members.join(","))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strings_are_quoted_as_go_quotes_them() {
        assert_eq!(quoted("é\u{1}<\"\\\t"), "\"é\\x01<\\\"\\\\\\t\"");
        assert_eq!(quoted(""), "\"\"");
    }

    #[test]
    fn lists_are_json_with_html_characters_escaped() {
        // kube-apiserver v1.37.2 and v1.35.4 both answer a ClusterRole
        // refused for nonResourceURLs ["/<a>&é\u0001"] with this list.
        assert_eq!(
            strings(&["/<a>&é\u{1}"]),
            "[\"/\\u003ca\\u003e\\u0026é\\u0001\"]"
        );
        assert_eq!(strings(&["*", "UPDATE"]), "[\"*\",\"UPDATE\"]");
    }

    #[test]
    fn internal_structs_keep_their_go_field_names_and_order() {
        assert_eq!(
            internal_struct(&[
                ("Key", json!("a")),
                ("Value", json!("")),
                ("Effect", json!("NoSchedule")),
                ("TimeAdded", Value::Null),
            ]),
            "{\"Key\":\"a\",\"Value\":\"\",\"Effect\":\"NoSchedule\",\"TimeAdded\":null}"
        );
    }
}
