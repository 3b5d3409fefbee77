//! Tests of the load-balancer conditions' decisions.

use std::time::Duration;

use ccm_cloud_provider::TargetHealth;
use proptest::prelude::*;

use super::*;

fn at(seconds: i64) -> Time {
    Time(jiff::Timestamp::from_second(1_700_000_000 + seconds).unwrap())
}

fn unhealthy(reason: &str) -> TargetState {
    TargetState::Unhealthy {
        reason: reason.into(),
    }
}

fn health(targets: &[(&str, TargetState)]) -> LoadBalancerHealth {
    LoadBalancerHealth {
        targets: targets
            .iter()
            .map(|(node, state)| TargetHealth::new(*node, state.clone()))
            .collect(),
    }
}

#[test]
fn targets_say_counts_and_name_the_unhealthy_nodes() {
    let all = targets(&health(&[
        ("a", TargetState::Healthy),
        ("b", TargetState::Healthy),
    ]));
    assert_eq!(
        (all.status, all.reason, all.message.as_str()),
        ("True", "AllTargetsHealthy", "2 of 2 targets healthy")
    );
    assert!(all.all_healthy());

    let some = targets(&health(&[
        ("ip-10-0-1-7", unhealthy("Target.Timeout")),
        ("ip-10-0-1-5", TargetState::Healthy),
        ("ip-10-0-1-9", TargetState::Initial),
        ("ip-10-0-1-6", unhealthy("")),
        ("ip-10-0-1-8", TargetState::Healthy),
    ]));
    assert_eq!(
        (some.status, some.reason, some.message.as_str()),
        (
            "False",
            "TargetsUnhealthy",
            "2 of 5 targets healthy; unhealthy: ip-10-0-1-6, ip-10-0-1-7 (Target.Timeout)"
        )
    );
    assert!(!some.all_healthy());

    let starting = targets(&health(&[
        ("b", TargetState::Initial),
        ("a", TargetState::Healthy),
    ]));
    assert_eq!(
        (starting.status, starting.reason, starting.message.as_str()),
        (
            "Unknown",
            "TargetsInitializing",
            "1 of 2 targets healthy; initializing: b"
        )
    );

    let none = targets(&LoadBalancerHealth::default());
    assert_eq!((none.status, none.reason), ("False", "NoTargets"));
}

#[test]
fn a_node_with_one_bad_target_group_is_unhealthy_and_counted_once() {
    let wanted = targets(&health(&[
        ("a", TargetState::Healthy),
        ("a", unhealthy("Target.FailedHealthChecks")),
        ("b", TargetState::Healthy),
        ("b", TargetState::Healthy),
    ]));
    assert_eq!(
        wanted.message,
        "1 of 2 targets healthy; unhealthy: a (Target.FailedHealthChecks)"
    );
    assert_eq!(not_healthy(&health(&[("a", TargetState::Initial)])), 1);
}

#[test]
fn long_lists_name_ten_nodes_and_count_the_rest() {
    let many: Vec<(String, TargetState)> = (0..25)
        .map(|i| (format!("n{i:02}"), unhealthy("Target.Timeout")))
        .collect();
    let borrowed: Vec<(&str, TargetState)> =
        many.iter().map(|(n, s)| (n.as_str(), s.clone())).collect();
    let wanted = targets(&health(&borrowed));
    assert!(
        wanted
            .message
            .starts_with("0 of 25 targets healthy; unhealthy: n00 (Target.Timeout)")
    );
    assert!(
        wanted.message.ends_with("n09 (Target.Timeout) and 15 more"),
        "{}",
        wanted.message
    );
}

#[test]
fn errors_give_their_reason_and_throttling_says_nothing() {
    let reason = |err: CloudError| failed(&err).map(|w| (w.status, w.reason));
    assert_eq!(
        reason(CloudError::QuotaExceeded {
            message: "TooManyLoadBalancers: limit 50".into()
        }),
        Some(("False", "QuotaExceeded"))
    );
    assert_eq!(
        reason(CloudError::invalid(
            "service.beta.kubernetes.io/x",
            "not a number"
        )),
        Some(("False", "InvalidAnnotation"))
    );
    assert_eq!(
        reason(CloudError::Retry {
            after: Duration::from_secs(5),
            reason: "provisioning".into()
        }),
        Some(("False", "Pending"))
    );
    assert_eq!(
        reason(CloudError::msg("boom")),
        Some(("False", "CloudError"))
    );
    assert_eq!(
        reason(CloudError::Throttled {
            retry_after: Duration::from_secs(1)
        }),
        None
    );
    assert_eq!(reason(CloudError::ImplementedElsewhere), None);
    let long = failed(&CloudError::msg("é".repeat(4000))).unwrap();
    assert!(long.message.len() <= MAX_MESSAGE && long.message.ends_with("..."));
}

#[test]
fn provisioned_names_where_the_load_balancer_answers() {
    let ingress = [
        LoadBalancerIngress {
            hostname: Some("lb.example".into()),
            ..LoadBalancerIngress::default()
        },
        LoadBalancerIngress {
            ip: Some("203.0.113.7".into()),
            ..LoadBalancerIngress::default()
        },
    ];
    assert_eq!(
        provisioned(&ingress).message,
        "load balancer ready at lb.example, 203.0.113.7"
    );
    assert_eq!(provisioned(&[]).message, "load balancer ready");
}

#[test]
fn a_write_carries_only_what_changed_and_keeps_transition_times() {
    let first = changes(&[], &[pending("waiting")], Some(1), &at(0));
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].last_transition_time, at(0));
    assert_eq!(first[0].observed_generation, Some(1));
    // The same again: nothing to write.
    assert!(changes(&first, &[pending("waiting")], Some(1), &at(5)).is_empty());
    // Another message, same status: written, the transition time kept.
    let reworded = changes(&first, &[pending("still waiting")], Some(1), &at(5));
    assert_eq!(reworded[0].last_transition_time, at(0));
    // A new generation alone is written too.
    assert_eq!(
        changes(&first, &[pending("waiting")], Some(2), &at(5)).len(),
        1
    );
    // Another status: a new transition time.
    let ready = changes(&first, &[provisioned(&[])], Some(1), &at(9));
    assert_eq!(ready[0].last_transition_time, at(9));
    assert_eq!(ready[0].status, "True");
}

fn any_wanted() -> impl Strategy<Value = Wanted> {
    (
        prop::sample::select(&OURS[..]),
        prop::sample::select(&["True", "False", "Unknown"][..]),
        prop::sample::select(&["Pending", "Provisioned", "TargetsUnhealthy"][..]),
        "[a-c]{0,3}",
    )
        .prop_map(|(type_, status, reason, message)| Wanted {
            type_,
            status,
            reason,
            message,
        })
}

proptest! {
    /// Applying a write's changes and asking again gives nothing to write,
    /// and a transition time moves only with the status.
    #[test]
    fn changes_converge_and_times_move_only_with_status(
        before in prop::collection::vec(any_wanted(), 0..2),
        after in prop::collection::vec(any_wanted(), 0..2),
        generation in prop::option::of(0i64..3),
    ) {
        let mut before = before;
        before.dedup_by_key(|w| w.type_);
        let mut after = after;
        after.dedup_by_key(|w| w.type_);
        let stored = changes(&[], &before, Some(0), &at(0));
        let written = changes(&stored, &after, generation, &at(10));
        let mut merged = stored.clone();
        for c in &written {
            merged.retain(|m| m.type_ != c.type_);
            merged.push(c.clone());
        }
        prop_assert!(changes(&merged, &after, generation, &at(20)).is_empty());
        for c in &written {
            let old = stored.iter().find(|s| s.type_ == c.type_);
            let moved = c.last_transition_time == at(10);
            prop_assert_eq!(moved, old.is_none_or(|o| o.status != c.status));
        }
    }
}
