//! Reading and writing `metadata` of objects held as JSON.

use serde_json::{Map, Value, json};

/// `metadata.<field>` as a string, if set and non-empty.
pub(crate) fn str_field<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?
        .get(field)?
        .as_str()
        .filter(|s| !s.is_empty())
}

pub(crate) fn name(obj: &Value) -> Option<&str> {
    str_field(obj, "name")
}

pub(crate) fn namespace(obj: &Value) -> Option<&str> {
    str_field(obj, "namespace")
}

pub(crate) fn uid(obj: &Value) -> Option<&str> {
    str_field(obj, "uid")
}

pub(crate) fn resource_version(obj: &Value) -> Option<&str> {
    str_field(obj, "resourceVersion")
}

pub(crate) fn deletion_timestamp(obj: &Value) -> Option<&str> {
    str_field(obj, "deletionTimestamp")
}

/// `metadata.labels`, if any.
pub(crate) fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.get("labels")?.as_object()
}

/// `metadata.finalizers` (empty when unset).
pub(crate) fn finalizers(obj: &Value) -> Vec<&str> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `metadata.generation` (0 when unset).
pub(crate) fn generation(obj: &Value) -> i64 {
    obj.get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The `metadata` map, created if missing or not a map; `None` when `obj`
/// is not an object at all.
fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut()
}

/// Sets `metadata.<field>`, or removes it when `value` is `None`.
pub(crate) fn set(obj: &mut Value, field: &str, value: Option<Value>) {
    let Some(meta) = metadata_mut(obj) else {
        return;
    };
    match value {
        Some(v) => {
            meta.insert(field.to_owned(), v);
        }
        None => {
            meta.remove(field);
        }
    }
}

/// Copies `metadata.<field>` from `from` into `to` (removing it when `from` has none).
pub(crate) fn copy(to: &mut Value, from: &Value, field: &str) {
    let value = from.get("metadata").and_then(|m| m.get(field)).cloned();
    set(to, field, value);
}

/// A top-level field of an object (`spec`, `status`), `Null` when absent.
pub(crate) fn top<'a>(obj: &'a Value, field: &str) -> &'a Value {
    obj.get(field).unwrap_or(&Value::Null)
}

/// Sets a top-level field, removing it when `value` is null.
pub(crate) fn set_top(obj: &mut Value, field: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        if value.is_null() {
            map.remove(field);
        } else {
            map.insert(field.to_owned(), value);
        }
    }
}

/// `metadata` alone, as `PartialObjectMetadata`.
pub(crate) fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Now, as Kubernetes writes `metav1.Time`: RFC 3339 to the second, UTC.
pub(crate) fn now_time() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The time `secs` from now, as `metav1.Time`.
pub(crate) fn time_in(secs: i64) -> String {
    let now = jiff::Timestamp::now();
    let later = now
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap_or(now);
    later.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_strings_read_as_unset() {
        let obj = json!({"metadata": {"name": "a", "namespace": ""}});
        assert_eq!(name(&obj), Some("a"));
        assert_eq!(namespace(&obj), None);
    }

    #[test]
    fn set_creates_metadata_and_removes_on_none() {
        let mut obj = json!({});
        set(&mut obj, "uid", Some(json!("u")));
        assert_eq!(uid(&obj), Some("u"));
        set(&mut obj, "uid", None);
        assert_eq!(obj, json!({"metadata": {}}));
    }

    #[test]
    fn times_are_rfc3339_seconds_in_utc() {
        let t = now_time();
        assert_eq!(t.len(), "2024-01-01T00:00:00Z".len());
        assert!(t.ends_with('Z'));
    }
}
