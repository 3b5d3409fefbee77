//! kube-apiserver's checks of a Lease's spec, in its words.

use serde_json::Value;

/// Every problem with the Lease `obj`'s spec, as `(field, message)`.
pub(crate) fn check(obj: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    if let Some(d) = obj
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        .filter(|d| *d <= 0)
    {
        causes.push((
            "spec.leaseDurationSeconds".into(),
            format!("Invalid value: {d}: must be greater than 0"),
        ));
    }
    if let Some(t) = obj
        .pointer("/spec/leaseTransitions")
        .and_then(Value::as_i64)
        .filter(|t| *t < 0)
    {
        causes.push((
            "spec.leaseTransitions".into(),
            format!("Invalid value: {t}: must be greater than or equal to 0"),
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_lease_lasts_a_positive_time_and_counts_transitions_from_zero() {
        assert!(check(&json!({ "spec": { "leaseDurationSeconds": 15 } })).is_empty());
        assert_eq!(
            check(&json!({ "spec": { "leaseDurationSeconds": 0, "leaseTransitions": -1 } })).len(),
            2
        );
    }
}
