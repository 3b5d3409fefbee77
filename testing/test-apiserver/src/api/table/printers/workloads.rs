//! Printers of namespaced workload kinds: pods, config maps, secrets,
//! service accounts and events.

use serde_json::Value;

use super::{AGE, NAME, age_of, col, entries, items, name, text};
use crate::api::table::{Column, age};

pub(in crate::api::table) const POD: &[Column] = &[
    NAME,
    col("Ready", "string", 0, "Ready containers of all containers."),
    col(
        "Status",
        "string",
        0,
        "The pod's status, or why it is not running.",
    ),
    col("Restarts", "string", 0, "Container restarts in all."),
    AGE,
    col("IP", "string", 1, "The pod's IP address."),
    col("Node", "string", 1, "The node the pod runs on."),
    col(
        "Nominated Node",
        "string",
        1,
        "The node the scheduler nominated.",
    ),
    col(
        "Readiness Gates",
        "string",
        1,
        "Readiness gates met of all.",
    ),
];

pub(super) fn pod(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let statuses = items(v, "/status/containerStatuses");
    let total = items(v, "/spec/containers").len();
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|s| s["restartCount"].as_i64())
        .sum();
    let mut reason = match text(v, "/status/reason") {
        "" => text(v, "/status/phase").to_owned(),
        r => r.to_owned(),
    };
    for status in statuses.iter().rev() {
        let waiting = status
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str);
        let terminated = status
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str);
        if let Some(r) = waiting.or(terminated).filter(|r| !r.is_empty()) {
            reason = r.to_owned();
        }
    }
    if v.pointer("/metadata/deletionTimestamp").is_some() && reason != "NodeLost" {
        reason = "Terminating".to_owned();
    }
    let gates = items(v, "/spec/readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let met = gates
            .iter()
            .filter(|g| {
                items(v, "/status/conditions")
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    let or_none = |s: &str| Value::from(if s.is_empty() { "<none>" } else { s });
    vec![
        name(v),
        Value::from(format!("{ready}/{total}")),
        Value::from(reason),
        Value::from(restarts.to_string()),
        age_of(v, now),
        or_none(text(v, "/status/podIP")),
        or_none(text(v, "/spec/nodeName")),
        or_none(text(v, "/status/nominatedNodeName")),
        Value::from(gates),
    ]
}

pub(in crate::api::table) const CONFIG_MAP: &[Column] = &[
    NAME,
    col("Data", "string", 0, "How many keys it holds."),
    AGE,
];

pub(super) fn config_map(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let keys = entries(v, "/data") + entries(v, "/binaryData");
    vec![name(v), Value::from(keys), age_of(v, now)]
}

pub(in crate::api::table) const SECRET: &[Column] = &[
    NAME,
    col("Type", "string", 0, "The secret's type."),
    col("Data", "string", 0, "How many keys it holds."),
    AGE,
];

pub(super) fn secret(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        name(v),
        Value::from(text(v, "/type")),
        Value::from(entries(v, "/data")),
        age_of(v, now),
    ]
}

/// Since 1.35 a ServiceAccount's row no longer counts its secrets.
pub(in crate::api::table) const SERVICE_ACCOUNT: &[Column] = &[NAME, AGE];

pub(super) fn service_account(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![name(v), age_of(v, now)]
}

/// An event's columns lead with when it was last seen, as kube-apiserver's;
/// its name is a wide column.
pub(in crate::api::table) const EVENT: &[Column] = &[
    col("Last Seen", "string", 0, "When the event was last seen."),
    col("Type", "string", 0, "Normal or Warning."),
    col("Reason", "string", 0, "Why the event was emitted."),
    col(
        "Object",
        "string",
        0,
        "The object the event is about: kind/name.",
    ),
    col("Subobject", "string", 1, "The part of the object, if any."),
    col(
        "Source",
        "string",
        1,
        "The component that reported the event.",
    ),
    col("Message", "string", 0, "What happened."),
    col("First Seen", "string", 1, "When the event was first seen."),
    col("Count", "string", 1, "How often it was seen."),
    Column {
        priority: 1,
        ..NAME
    },
];

/// `component, instance`, from the legacy source or the reporting fields.
fn source(v: &Value) -> String {
    let first = |a: &str, b: &str| {
        let a = text(v, a);
        if a.is_empty() {
            text(v, b).to_owned()
        } else {
            a.to_owned()
        }
    };
    let component = first("/source/component", "/reportingComponent");
    let instance = first("/source/host", "/reportingInstance");
    match (component.is_empty(), instance.is_empty()) {
        (true, _) => String::new(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    }
}

pub(super) fn event(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let since = |pointer: &str| {
        v.pointer(pointer)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(|t| age::since(Some(t), now))
    };
    let first_seen = since("/firstTimestamp")
        .or_else(|| since("/eventTime"))
        .unwrap_or_else(|| "<unknown>".to_owned());
    let mut last_seen = since("/lastTimestamp").unwrap_or_else(|| first_seen.clone());
    let mut count = v.pointer("/count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = v.pointer("/series").filter(|s| s.is_object()) {
        last_seen = since("/series/lastObservedTime").unwrap_or_else(|| "<unknown>".to_owned());
        count = series["count"].as_i64().unwrap_or_default();
    } else if count == 0 {
        // A singleton event of the newer API has no count.
        count = 1;
    }
    let kind = text(v, "/involvedObject/kind").to_ascii_lowercase();
    let object = match text(v, "/involvedObject/name") {
        "" => kind,
        target => format!("{kind}/{target}"),
    };
    vec![
        Value::from(last_seen),
        Value::from(text(v, "/type")),
        Value::from(text(v, "/reason")),
        Value::from(object),
        Value::from(text(v, "/involvedObject/fieldPath")),
        Value::from(source(v)),
        Value::from(text(v, "/message").trim()),
        Value::from(first_seen),
        Value::from(count),
        name(v),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_prints_when_what_and_about_whom() {
        let now: jiff::Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let event = json!({
            "metadata": { "name": "web.1" },
            "involvedObject": { "kind": "Service", "name": "web" },
            "type": "Warning", "reason": "SyncLoadBalancerFailed", "message": " no nodes \n",
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:09:00Z", "count": 3,
            "source": { "component": "service-controller" },
        });
        assert_eq!(
            Value::Array(super::event(&event, now)),
            json!([
                "60s",
                "Warning",
                "SyncLoadBalancerFailed",
                "service/web",
                "",
                "service-controller",
                "no nodes",
                "10m",
                3,
                "web.1"
            ])
        );
        let singleton = json!({
            "metadata": { "name": "e" }, "involvedObject": { "kind": "Node" },
            "eventTime": "2026-01-01T00:08:00.000000Z",
            "reportingComponent": "ccm", "reportingInstance": "ccm-1",
        });
        let cells = super::event(&singleton, now);
        assert_eq!(cells[0], "2m");
        assert_eq!(cells[3], "node");
        assert_eq!(cells[5], "ccm, ccm-1");
        assert_eq!(cells[8], 1);
    }

    #[test]
    fn a_pod_prints_readiness_the_reason_it_is_not_running_and_restarts() {
        let now = jiff::Timestamp::now();
        let pod = json!({
            "metadata": { "name": "p" },
            "spec": { "containers": [{ "name": "a" }, { "name": "b" }], "nodeName": "n1" },
            "status": { "phase": "Pending", "containerStatuses": [
                { "name": "a", "ready": true, "restartCount": 2 },
                { "name": "b", "ready": false, "restartCount": 1, "state": { "waiting": { "reason": "CrashLoopBackOff" } } },
            ]},
        });
        let cells = super::pod(&pod, now);
        assert_eq!(
            cells[1..4],
            [json!("1/2"), json!("CrashLoopBackOff"), json!("3")]
        );
        assert_eq!(cells[5], "<none>");
        assert_eq!(cells[6], "n1");
    }
}
