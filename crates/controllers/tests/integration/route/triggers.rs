//! When passes run and what they cost: node events trigger them (debounced,
//! or with the watch gate at least 10 s apart), other node updates do not,
//! a burst shares passes, the node condition is written once per change,
//! and each pass is counted by its outcome.

use std::time::{Duration, Instant};

use ccm_controllers::{ControllerId, ControllerSettings};
use ccm_provider_fake::{InjectedError, Operation};
use futures::future::join_all;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{
    HOUR, WAIT, node, passes, route_settings, syncs, table, wait_for_condition, wait_for_table,
};
use crate::support::{Harness, eventually};

/// Waits until `n` passes have run, then returns their number.
async fn wait_for_passes(h: &Harness, n: u64) -> u64 {
    eventually(&format!("{n} passes"), WAIT, || async {
        Some(passes(h)).filter(|p| *p >= n)
    })
    .await
    .expect("a bounded wait")
}

/// `PATCH nodes/<name>/status` requests in the API server's log.
fn status_writes(h: &Harness, name: &str) -> usize {
    h.server
        .requests()
        .iter()
        .filter(|r| {
            r.resource == "nodes"
                && r.subresource == "status"
                && r.verb == "patch"
                && r.name == name
        })
        .count()
}

#[tokio::test]
async fn a_new_node_gets_its_route_without_waiting_for_the_period() {
    let mut h = Harness::new().await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;
    wait_for_passes(&h, 1).await;

    // The period is an hour: a route within `WAIT` comes from the event.
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    wait_for_table(&h, &[("10.244.1.0/24", "n1", false)]).await;
    // A pass counts once it has set the conditions too.
    wait_for_passes(&h, 2).await;
    assert_eq!(passes(&h), 2, "one pass, triggered by the node");
    assert_eq!(h.cloud.count(Operation::ListRoutes), 2);
    h.stop().await;
}

#[tokio::test]
async fn a_burst_of_nodes_costs_one_list_per_pass_and_one_create_per_route() {
    const N: usize = 40;
    let mut h = Harness::new().await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;
    wait_for_passes(&h, 1).await;

    let nodes: Vec<_> = (1..=N)
        .map(|i| node(&format!("n{i}"), &[&format!("10.244.{i}.0/24")]))
        .collect();
    let added = Instant::now();
    join_all(nodes.iter().map(|n| h.create_node(n))).await;
    let expected: Vec<(String, String, bool)> = (1..=N)
        .map(|i| (format!("10.244.{i}.0/24"), format!("n{i}"), false))
        .collect();
    let expected: Vec<(&str, &str, bool)> = expected
        .iter()
        .map(|(c, t, b)| (c.as_str(), t.as_str(), *b))
        .collect();
    wait_for_table(&h, &expected).await;
    for i in 1..=N {
        wait_for_condition(&h, &format!("n{i}"), "False").await;
    }
    h.settled().await;
    let passes = passes(&h);
    println!(
        "{N} nodes: routes in {:?}, {passes} passes",
        added.elapsed()
    );
    assert_eq!(
        h.cloud.count(Operation::ListRoutes) as u64,
        passes,
        "one list per pass"
    );
    assert_eq!(
        h.cloud.count(Operation::CreateRoute),
        N,
        "one create per route, none repeated"
    );
    assert!(passes <= 5, "the burst shares passes: {passes}");
    for i in 1..=N {
        assert_eq!(
            status_writes(&h, &format!("n{i}")),
            1,
            "n{i}'s condition written once"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn heartbeats_and_other_node_updates_do_not_trigger_a_pass_but_a_pod_cidr_does() {
    let mut h = Harness::new().await;
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.create_node(&node("n2", &[])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;
    wait_for_condition(&h, "n1", "False").await;
    // The condition write is itself a node update.
    h.settled().await;
    let before = passes(&h);

    for second in 1..=3 {
        let time = format!("2030-01-01T00:00:0{second}Z");
        let beat = json!({ "status": { "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": time, "lastTransitionTime": time,
        }] } });
        h.nodes()
            .patch_status("n1", &PatchParams::default(), &Patch::Strategic(&beat))
            .await
            .expect("heartbeat");
    }
    let labels = json!({ "metadata": { "labels": { "team": "network" } } });
    h.nodes()
        .patch("n1", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("labelled");
    h.settled().await;
    assert_eq!(
        passes(&h),
        before,
        "heartbeats and labels are not route changes"
    );

    // As the node IPAM controller assigns a CIDR to a new node.
    let cidrs = json!({ "spec": { "podCIDR": "10.244.2.0/24", "podCIDRs": ["10.244.2.0/24", "fd00:10:244:2::/64"] } });
    h.nodes()
        .patch("n2", &PatchParams::default(), &Patch::Merge(&cidrs))
        .await
        .expect("CIDRs assigned");
    wait_for_table(
        &h,
        &[
            ("10.244.1.0/24", "n1", false),
            ("10.244.2.0/24", "n2", false),
            ("fd00:10:244:2::/64", "n2", false),
        ],
    )
    .await;
    wait_for_passes(&h, before + 1).await;
    assert_eq!(passes(&h), before + 1);
    h.stop().await;
}

#[tokio::test]
async fn the_condition_is_written_once_per_change() {
    let mut h = Harness::new().await;
    for i in 1..=3 {
        h.create_node(&node(&format!("n{i}"), &[&format!("10.244.{i}.0/24")]))
            .await;
    }
    h.start(
        &[ControllerId::Route],
        &route_settings(Duration::from_millis(300)),
    )
    .await;
    for i in 1..=3 {
        wait_for_condition(&h, &format!("n{i}"), "False").await;
    }

    // n4's route cannot be created at first: True, then False once a
    // retried pass creates it.
    h.cloud
        .fail_next(Some(Operation::CreateRoute), InjectedError::NotFound, 1);
    h.create_node(&node("n4", &["10.244.4.0/24"])).await;
    let unavailable = wait_for_condition(&h, "n4", "True").await;
    assert_eq!(unavailable.reason.as_deref(), Some("NoRouteCreated"));
    assert_eq!(
        unavailable.message.as_deref(),
        Some("RouteController failed to create a route")
    );
    let available = wait_for_condition(&h, "n4", "False").await;
    assert_eq!(available.reason.as_deref(), Some("RouteCreated"));

    let settled = passes(&h);
    eventually("three more passes", WAIT, || async {
        (passes(&h) >= settled + 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    for i in 1..=3 {
        assert_eq!(
            status_writes(&h, &format!("n{i}")),
            1,
            "n{i}: one change, one write"
        );
    }
    assert_eq!(status_writes(&h, "n4"), 2, "n4: two changes, two writes");
    let events = h.events("n4", "FailedToCreateRoute").await;
    assert_eq!(events.len(), 1, "{events:?}");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.starts_with("Could not create route") && note.contains("10.244.4.0/24 for node n4"),
        "{note}"
    );
    h.stop().await;
}

/// Upstream's `outcome` label, counted once a pass ends: `changed` when a
/// route was created or deleted, `noop` otherwise, and `error` only when
/// the routes could not be listed — a failed create is no error. Without
/// the watch gate every pass is `periodic`, as upstream.
#[tokio::test]
async fn passes_count_as_changed_noop_or_error_once_they_end() {
    let mut h = Harness::new().await;
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;
    let counted = |outcome: &'static str, n: u64| {
        let h = &h;
        async move {
            eventually(&format!("{n} {outcome} passes"), WAIT, || async {
                (syncs(h, outcome, "periodic") == n).then_some(())
            })
            .await
            .expect("a bounded wait");
        }
    };
    counted("changed", 1).await;

    // A node without a pod CIDR: a pass with nothing to create.
    h.create_node(&node("n2", &[])).await;
    counted("noop", 1).await;

    // n3's only create fails, for good: nothing changed, and no error.
    h.cloud
        .fail_next(Some(Operation::CreateRoute), InjectedError::NotFound, 1);
    h.create_node(&node("n3", &["10.244.3.0/24"])).await;
    counted("noop", 2).await;
    assert_eq!(syncs(&h, "error", "periodic"), 0);

    h.cloud.fail_next(
        Some(Operation::ListRoutes),
        InjectedError::Other("cloud API unavailable".into()),
        1,
    );
    h.create_node(&node("n4", &[])).await;
    counted("error", 1).await;
    h.stop().await;

    for outcome in ["changed", "noop", "error"] {
        assert_eq!(syncs(&h, outcome, "node_change"), 0, "the gate is off");
    }
    assert_eq!(
        passes(&h),
        h.cloud.count(Operation::ListRoutes) as u64,
        "every pass counted once"
    );
}

/// With upstream's gate, a node event right after a pass waits until 10 s
/// after that pass started (the schedule's own tests show the rest, on a
/// paused clock).
#[tokio::test]
async fn with_the_watch_gate_a_node_event_right_after_a_pass_waits() {
    let mut h = Harness::new().await;
    let settings = ControllerSettings {
        watch_based_routes: true,
        ..route_settings(HOUR)
    };
    h.start(&[ControllerId::Route], &settings).await;
    wait_for_passes(&h, 1).await;
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(passes(&h), 1, "no pass within 10 s of the first");
    assert_eq!(syncs(&h, "noop", "periodic"), 1, "the first pass");
    assert!(table(&h).is_empty(), "n1 waits for its route");
    h.stop().await;
}
