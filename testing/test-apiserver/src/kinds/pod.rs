//! The QoS class the API server stamps on a new Pod's status.

use serde_json::Value;

/// `Guaranteed` when every container has equal CPU and memory requests and
/// limits, `BestEffort` when none has any, `Burstable` otherwise.
pub(super) fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|field| {
            pod.pointer(&format!("/spec/{field}"))
                .and_then(Value::as_array)
        })
        .flatten()
        .collect();
    let amounts = |c: &Value, which: &str| -> Vec<(String, String)> {
        c.pointer(&format!("/resources/{which}"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| matches!(k.as_str(), "cpu" | "memory"))
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let any = containers
        .iter()
        .any(|c| !amounts(c, "requests").is_empty() || !amounts(c, "limits").is_empty());
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let limits = amounts(c, "limits");
        let requests = amounts(c, "requests");
        limits.len() == 2 && (requests.is_empty() || requests == limits)
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn classes_follow_requests_and_limits() {
        let pod = |resources: Value| json!({"spec": {"containers": [{"name": "c", "resources": resources}]}});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&pod(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
    }
}
