//! A Service's `status.conditions` (`metav1.Condition`), decoded as
//! kube-apiserver decodes them: a field left out is Go's zero value (`""`,
//! a `null` `lastTransitionTime`, no `observedGeneration`), and an empty
//! list is no list.
//!
//! # Not validated
//!
//! kube-apiserver 1.35 to 1.37 do not run `metav1validation.ValidateConditions`
//! on Services: `ValidateServiceStatusUpdate`
//! (k8s.io/kubernetes pkg/apis/core/validation/validation.go) checks only
//! metadata and `status.loadBalancer`, so a bad status, reason or time, or a
//! type twice, is stored as sent. So it is here; the contract suite
//! (`tests/service_conditions.rs`) pins that against the real server.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

/// `metav1.Condition` as Go's `encoding/json` reads it: `null` or absent is
/// the zero value.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type", default, deserialize_with = "or_zero")]
    type_: String,
    #[serde(default, deserialize_with = "or_zero")]
    status: String,
    #[serde(default, deserialize_with = "or_zero")]
    observed_generation: i64,
    #[serde(default)]
    last_transition_time: Option<Time>,
    #[serde(default, deserialize_with = "or_zero")]
    reason: String,
    #[serde(default, deserialize_with = "or_zero")]
    message: String,
}

fn or_zero<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl Condition {
    /// As Go encodes it: every field but `observedGeneration` (omitempty)
    /// is shown, the zero time as `null`.
    fn encode(&self) -> Result<Value, serde_json::Error> {
        let mut condition = json!({
            "type": self.type_,
            "status": self.status,
            "lastTransitionTime": serde_json::to_value(&self.last_transition_time)?,
            "reason": self.reason,
            "message": self.message,
        });
        if self.observed_generation != 0 {
            condition["observedGeneration"] = json!(self.observed_generation);
        }
        Ok(condition)
    }
}

/// Takes `status.conditions` out of a Service body, for [`restore`] to put
/// back decoded once the rest of the Service is.
pub(super) fn take(service: &mut Value) -> Option<Value> {
    service
        .get_mut("status")
        .and_then(Value::as_object_mut)
        .and_then(|status| status.remove("conditions"))
}

/// Decodes `conditions` (from [`take`]) into the decoded Service's status.
///
/// # Errors
///
/// A condition that is not an object, or a field of the wrong type (a time
/// that is not RFC 3339): what kube-apiserver cannot decode either.
pub(super) fn restore(service: &mut Value, conditions: Value) -> Result<(), serde_json::Error> {
    let decoded: Vec<Value> = Option::<Vec<Condition>>::deserialize(conditions)?
        .unwrap_or_default()
        .iter()
        .map(Condition::encode)
        .collect::<Result<_, _>>()?;
    if decoded.is_empty() {
        return Ok(());
    }
    let Some(map) = service.as_object_mut() else {
        return Ok(());
    };
    let status = map
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    status["conditions"] = Value::Array(decoded);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(conditions: &Value) -> Result<Value, serde_json::Error> {
        let mut service = json!({"status": {"loadBalancer": {}, "conditions": conditions.clone()}});
        let taken = take(&mut service).expect("conditions");
        restore(&mut service, taken)?;
        Ok(service["status"].clone())
    }

    #[test]
    fn missing_fields_are_go_zero_values() {
        let status = decoded(&json!([
            {"type": "A", "reason": null, "observedGeneration": 0},
            {"type": "B", "status": "True", "observedGeneration": 3,
             "lastTransitionTime": "2024-01-01T00:00:00.75+02:00"}
        ]))
        .expect("decodes");
        assert_eq!(
            status["conditions"],
            json!([
                {"type": "A", "status": "", "lastTransitionTime": null, "reason": "", "message": ""},
                {"type": "B", "status": "True", "observedGeneration": 3,
                 "lastTransitionTime": "2023-12-31T22:00:00Z", "reason": "", "message": ""}
            ])
        );
    }

    #[test]
    fn invalid_conditions_are_kept_as_kube_apiserver_keeps_them() {
        let bad = json!([
            {"type": "bad type!", "status": "Bogus", "reason": "not a reason", "observedGeneration": -1,
             "lastTransitionTime": "2024-01-01T00:00:00Z", "message": ""},
            {"type": "bad type!", "status": "True", "reason": "R",
             "lastTransitionTime": "2024-01-01T00:00:00Z", "message": ""}
        ]);
        assert_eq!(decoded(&bad).expect("decodes")["conditions"], bad);
    }

    #[test]
    fn an_empty_list_is_dropped_and_wrong_types_are_refused() {
        assert_eq!(
            decoded(&json!([])).expect("decodes"),
            json!({"loadBalancer": {}})
        );
        assert!(decoded(&json!([{"type": "A", "status": true}])).is_err());
        assert!(decoded(&json!([{"type": "A", "lastTransitionTime": "yesterday"}])).is_err());
        assert!(decoded(&json!(["A"])).is_err());
    }
}
