//! events.k8s.io/v1 Events are a second view of the core/v1 Events storage,
//! converted field by field as Kubernetes' conversion functions do.

use serde_json::{Map, Value};

use crate::status::ApiError;

/// The longest `note`, in bytes, events.k8s.io/v1 accepts.
const MAX_NOTE_BYTES: usize = 1024;

/// kube-apiserver's limit on an events.k8s.io/v1 Event's `note` (core/v1
/// `message` has none), with its words: the field is named `message` and
/// the value shown empty.
///
/// # Errors
///
/// 422 Invalid when the note is longer than 1024 bytes.
pub(crate) fn validate_note(event: &Value) -> Result<(), ApiError> {
    let note = event.get("note").and_then(Value::as_str).unwrap_or("");
    if note.len() <= MAX_NOTE_BYTES {
        return Ok(());
    }
    let name = event
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    // kube-apiserver validates both Event APIs as its internal core Event,
    // so the refusal names the kind without a group.
    Err(ApiError::invalid(
        "Event",
        "",
        name,
        &[(
            "message".to_owned(),
            format!("Invalid value: \"\": can have at most {MAX_NOTE_BYTES} characters"),
        )],
    ))
}

/// `(events.k8s.io/v1 field, core/v1 field)`; the rest have the same name.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Fields both versions carry under one name.
const SHARED: &[&str] = &[
    "metadata",
    "eventTime",
    "series",
    "reportingInstance",
    "action",
    "reason",
    "related",
    "type",
];

fn convert(
    from: &Value,
    api_version: &str,
    pairs: impl Iterator<Item = (&'static str, &'static str)>,
) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String("Event".into()));
    for (source, target) in pairs {
        if let Some(value) = from.get(source) {
            out.insert(target.into(), value.clone());
        }
    }
    Value::Object(out)
}

/// A stored core/v1 Event as events.k8s.io/v1 shows it.
pub(crate) fn to_events_v1(core: &Value) -> Value {
    let pairs = RENAMED
        .iter()
        .map(|(v1, core)| (*core, *v1))
        .chain(SHARED.iter().map(|f| (*f, *f)));
    let mut out = convert(core, "events.k8s.io/v1", pairs);
    // core/v1 requires involvedObject, so it is stored even when empty.
    let empty_regarding = out
        .get("regarding")
        .is_some_and(|r| r.as_object().is_some_and(Map::is_empty));
    if empty_regarding && let Some(map) = out.as_object_mut() {
        map.remove("regarding");
    }
    out
}

/// An events.k8s.io/v1 Event as the core/v1 storage holds it.
pub(crate) fn to_core(v1: &Value) -> Value {
    let pairs = RENAMED
        .iter()
        .copied()
        .chain(SHARED.iter().map(|f| (*f, *f)));
    let mut out = convert(v1, "v1", pairs);
    if let Some(map) = out.as_object_mut() {
        map.entry("involvedObject")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn conversion_round_trips_and_renames() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "n1"},
            "note": "hello", "reason": "Synced", "type": "Normal",
            "reportingController": "ccm", "reportingInstance": "ccm-1", "action": "Sync",
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2024-01-01T00:00:01.000000Z"}
        });
        let core = to_core(&v1);
        assert_eq!(core["message"], "hello");
        assert_eq!(core["involvedObject"]["name"], "n1");
        assert_eq!(core["reportingComponent"], "ccm");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(to_events_v1(&core), v1);
    }
}
