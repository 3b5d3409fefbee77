//! When passes run and what they cost: node events trigger them (debounced),
//! other node updates do not, a burst shares passes, and the node condition
//! is written once per change.

use std::time::{Duration, Instant};

use ccm_controllers::ControllerId;
use futures::future::join_all;
use kube::api::{Patch, PatchParams};
use provider_fake::{InjectedError, Operation};
use serde_json::json;

use crate::support::{Harness, eventually};
use crate::{HOUR, WAIT, node, passes, route_settings, wait_for_condition, wait_for_table};

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
