//! The sandbox's condition lines: each LoadBalancer Service's
//! `LoadBalancerProvisioned` and `LoadBalancerTargetsHealthy`, as the
//! service controller writes them, read from the list the sandbox's poll
//! already makes, and one line printed per condition that changed between
//! two polls.

use std::collections::BTreeMap;

use serde_json::Value;

/// The condition types the service controller writes, in the order printed.
pub(crate) const TYPES: [&str; 2] = ["LoadBalancerProvisioned", "LoadBalancerTargetsHealthy"];

/// One condition as the sandbox shows it: a change of any field prints a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Condition {
    /// One of [`TYPES`].
    type_: String,
    /// `True`, `False` or `Unknown`.
    status: String,
    reason: String,
    message: String,
}

/// Each LoadBalancer Service by `namespace/name`, with its conditions of
/// [`TYPES`] in that order; a Service the controller has not yet written
/// to has none.
pub(crate) type Observed = BTreeMap<String, Vec<Condition>>;

/// The LoadBalancer Services among `services` (items of a Service list)
/// and their conditions.
pub(crate) fn observe(services: &[Value]) -> Observed {
    services
        .iter()
        .filter(|s| s["spec"]["type"] == "LoadBalancer")
        .map(|s| {
            let key = format!(
                "{}/{}",
                s["metadata"]["namespace"].as_str().unwrap_or_default(),
                s["metadata"]["name"].as_str().unwrap_or_default()
            );
            let written = s["status"]["conditions"].as_array();
            let conditions = TYPES
                .iter()
                .filter_map(|type_| {
                    let c = written?.iter().find(|c| c["type"] == *type_)?;
                    let field = |name: &str| c[name].as_str().unwrap_or_default().to_owned();
                    Some(Condition {
                        type_: (*type_).to_owned(),
                        status: field("status"),
                        reason: field("reason"),
                        message: field("message"),
                    })
                })
                .collect();
            (key, conditions)
        })
        .collect()
}

/// The lines to print for what changed from `previous` to `current`: one
/// per condition that is new or differs in status, reason or message,
/// ordered by Service and then as [`TYPES`]. A condition or Service that
/// went away prints nothing: the sandbox shows progress, and `kubectl get`
/// shows what is gone.
pub(crate) fn changes(previous: &Observed, current: &Observed) -> Vec<String> {
    current
        .iter()
        .flat_map(|(service, conditions)| {
            let before = previous.get(service).map(Vec::as_slice).unwrap_or_default();
            conditions
                .iter()
                .filter(move |c| !before.contains(c))
                .map(move |c| line(service, c))
        })
        .collect()
}

/// `service default/web: LoadBalancerTargetsHealthy=True (AllTargetsHealthy:
/// 3 of 3 targets healthy)`, on one line whatever the message holds.
fn line(service: &str, c: &Condition) -> String {
    let message = c.message.split_whitespace().collect::<Vec<_>>().join(" ");
    let why = match (c.reason.is_empty(), message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(" ({})", c.reason),
        (true, false) => format!(" ({message})"),
        (false, false) => format!(" ({}: {message})", c.reason),
    };
    format!("service {service}: {}={}{why}", c.type_, c.status)
}

/// The Services in `observed` that do not yet say both of [`TYPES`] are
/// `True`: what `sandbox --check` waits for. Every condition in `observed`
/// has been printed by the time the sandbox asks, so an empty answer means
/// a `=True` line of each type was printed for every LoadBalancer Service.
pub(crate) fn not_all_true(observed: &Observed) -> Vec<&str> {
    observed
        .iter()
        .filter(|(_, conditions)| {
            TYPES.iter().any(|type_| {
                !conditions
                    .iter()
                    .any(|c| c.type_ == *type_ && c.status == "True")
            })
        })
        .map(|(service, _)| service.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn service(name: &str, type_: &str, conditions: &Value) -> Value {
        json!({
            "metadata": { "namespace": "default", "name": name },
            "spec": { "type": type_ },
            "status": { "conditions": conditions },
        })
    }

    fn healthy(message: &str) -> Value {
        json!({
            "type": "LoadBalancerTargetsHealthy", "status": "True",
            "reason": "AllTargetsHealthy", "message": message,
            "lastTransitionTime": "2024-01-01T00:00:00Z",
        })
    }

    fn provisioned() -> Value {
        json!({
            "type": "LoadBalancerProvisioned", "status": "True",
            "reason": "Provisioned", "message": "load balancer ready at 192.0.2.1",
        })
    }

    #[test]
    fn unchanged_conditions_print_nothing() {
        let services = [service("web", "LoadBalancer", &json!([provisioned()]))];
        let observed = observe(&services);
        assert!(changes(&observed, &observed).is_empty());
        // A field the line does not show is no change either.
        let mut later = healthy("3 of 3 targets healthy");
        later["lastTransitionTime"] = json!("2024-01-02T00:00:00Z");
        assert!(
            changes(
                &observe(&[service(
                    "web",
                    "LoadBalancer",
                    &json!([healthy("3 of 3 targets healthy")])
                )]),
                &observe(&[service("web", "LoadBalancer", &json!([later]))]),
            )
            .is_empty()
        );
    }

    #[test]
    fn a_changed_message_prints_its_condition_alone() {
        let before = observe(&[service(
            "web",
            "LoadBalancer",
            &json!([provisioned(), healthy("2 of 2 targets healthy")]),
        )]);
        let after = observe(&[service(
            "web",
            "LoadBalancer",
            &json!([provisioned(), healthy("3 of 3 targets healthy")]),
        )]);
        assert_eq!(
            changes(&before, &after),
            [
                "service default/web: LoadBalancerTargetsHealthy=True (AllTargetsHealthy: 3 of 3 targets healthy)"
            ]
        );
    }

    #[test]
    fn a_new_service_prints_each_of_its_conditions_in_type_order() {
        // Written in the other order, and with a condition of another writer.
        let other = json!({ "type": "Ready", "status": "True", "reason": "R", "message": "m" });
        let services = [service(
            "web",
            "LoadBalancer",
            &json!([healthy("1 of 1 targets healthy"), other, provisioned()]),
        )];
        assert_eq!(
            changes(&Observed::new(), &observe(&services)),
            [
                "service default/web: LoadBalancerProvisioned=True (Provisioned: load balancer ready at 192.0.2.1)",
                "service default/web: LoadBalancerTargetsHealthy=True (AllTargetsHealthy: 1 of 1 targets healthy)",
            ]
        );
    }

    #[test]
    fn lines_are_ordered_by_service_whatever_the_list_order() {
        let pending = json!({
            "type": "LoadBalancerProvisioned", "status": "False",
            "reason": "Pending", "message": "waiting\nfor the cloud",
        });
        let services = [
            service("lb-2", "LoadBalancer", &json!([provisioned()])),
            service("cluster", "ClusterIP", &json!([provisioned()])),
            service("lb-1", "LoadBalancer", &json!([pending])),
        ];
        assert_eq!(
            changes(&Observed::new(), &observe(&services)),
            [
                "service default/lb-1: LoadBalancerProvisioned=False (Pending: waiting for the cloud)",
                "service default/lb-2: LoadBalancerProvisioned=True (Provisioned: load balancer ready at 192.0.2.1)",
            ]
        );
    }

    #[test]
    fn a_condition_without_reason_or_message_prints_its_status_alone() {
        let bare = json!([{ "type": "LoadBalancerTargetsHealthy", "status": "Unknown" }]);
        let services = [service("web", "LoadBalancer", &bare)];
        assert_eq!(
            changes(&Observed::new(), &observe(&services)),
            ["service default/web: LoadBalancerTargetsHealthy=Unknown"]
        );
    }

    #[test]
    fn check_waits_for_both_conditions_true_on_every_load_balancer() {
        let unhealthy = json!({
            "type": "LoadBalancerTargetsHealthy", "status": "False",
            "reason": "TargetsUnhealthy",
            "message": "2 of 3 targets healthy; unhealthy: n1 (Target.InvalidState)",
        });
        let services = [
            service(
                "done",
                "LoadBalancer",
                &json!([provisioned(), healthy("1 of 1")]),
            ),
            service("fresh", "LoadBalancer", &Value::Null),
            service("sick", "LoadBalancer", &json!([provisioned(), unhealthy])),
        ];
        assert_eq!(
            not_all_true(&observe(&services)),
            ["default/fresh", "default/sick"]
        );
    }
}
