//! The cloud-node-lifecycle controller against the test API server and the
//! fake cloud.

use crate::support;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_controllers::ControllerId;
use ccm_provider_fake::{FakeCloud, InjectedError, InstanceState, Operation};
use k8s_openapi::api::core::v1::Node;
use support::{Harness, eventually, fast_settings, ready_node};

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const WAIT: Duration = Duration::from_secs(10);

fn has_shutdown_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == SHUTDOWN)
}

/// A harness whose cloud answers for the given node names only.
async fn harness_with_instances(names: &[&str]) -> Harness {
    let cloud = FakeCloud::default();
    cloud.set_auto_instances(true);
    let h = Harness::with_cloud(cloud).await;
    for name in names {
        h.create_node(&ready_node(name)).await;
    }
    // Synthesize their instances now, then stop answering for new names.
    use ccm_cloud_provider::Instances;
    for name in names {
        h.cloud
            .instance_exists(&h.nodes().get(name).await.unwrap())
            .await
            .unwrap();
    }
    h.cloud.set_auto_instances(false);
    h.cloud.clear_calls();
    h
}

#[tokio::test]
async fn a_not_ready_node_whose_instance_is_gone_is_deleted() {
    let mut h = harness_with_instances(&["n1", "n2"]).await;
    h.start(&[ControllerId::CloudNodeLifecycle], &fast_settings())
        .await;
    // Seen Ready, then the instance is terminated and the node stops reporting.
    h.cloud.set_instance_state("n1", InstanceState::Terminated);
    h.set_ready("n1", false).await;

    eventually("n1 deleted", WAIT, || async {
        h.nodes()
            .get_opt("n1")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    assert!(
        h.nodes().get_opt("n2").await.unwrap().is_some(),
        "the Ready node stays"
    );
    assert_eq!(h.events("n1", "DeletingNode").await.len(), 1);
    h.stop().await;
}

/// Upstream 1.35's reference: the event names the Node it deletes as a
/// `v1` Node with its UID, so a node later created under the same name is
/// not taken for it.
#[tokio::test]
async fn the_deleting_node_event_regards_the_v1_node_by_its_uid() {
    let mut h = harness_with_instances(&["n1"]).await;
    let uid = h.nodes().get("n1").await.unwrap().metadata.uid;
    assert!(uid.is_some(), "the API server gives the node a UID");
    h.start(&[ControllerId::CloudNodeLifecycle], &fast_settings())
        .await;
    h.cloud.set_instance_state("n1", InstanceState::Terminated);
    h.set_ready("n1", false).await;

    let events = eventually("a DeletingNode event", WAIT, || async {
        Some(h.events("n1", "DeletingNode").await).filter(|e| !e.is_empty())
    })
    .await
    .expect("a bounded wait");
    let regarding = events[0]
        .regarding
        .clone()
        .expect("the event regards the node");
    assert_eq!(regarding.api_version.as_deref(), Some("v1"));
    assert_eq!(regarding.kind.as_deref(), Some("Node"));
    assert_eq!(regarding.name.as_deref(), Some("n1"));
    assert_eq!(regarding.uid, uid, "the deleted node's UID");
    h.stop().await;
}

#[tokio::test]
async fn a_new_node_that_was_never_ready_is_not_deleted_within_the_grace_period() {
    let mut h = harness_with_instances(&[]).await;
    let mut node = ready_node("fresh");
    node.status.as_mut().unwrap().conditions = Some(vec![support::ready_condition(false)]);
    h.create_node(&node).await;
    let mut settings = fast_settings();
    settings.new_node_grace = Duration::from_secs(3600);
    h.start(&[ControllerId::CloudNodeLifecycle], &settings)
        .await;

    eventually("several monitor passes", WAIT, || async {
        (h.cloud.count(Operation::InstancesExist) >= 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert!(
        h.nodes().get_opt("fresh").await.unwrap().is_some(),
        "never deleted within the grace period"
    );
    h.stop().await;

    // Past the grace period the same node goes.
    settings.new_node_grace = Duration::ZERO;
    h.start(&[ControllerId::CloudNodeLifecycle], &settings)
        .await;
    eventually("fresh deleted", WAIT, || async {
        h.nodes()
            .get_opt("fresh")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    h.stop().await;
}

#[tokio::test]
async fn an_ambiguous_lookup_never_deletes() {
    let mut h = harness_with_instances(&["n1"]).await;
    h.cloud.set_instance_state("n1", InstanceState::Terminated);
    h.cloud.fail_next(
        Some(Operation::InstancesExist),
        InjectedError::Other("cloud API unavailable".into()),
        1000,
    );
    let mut settings = fast_settings();
    settings.new_node_grace = Duration::ZERO;
    h.start(&[ControllerId::CloudNodeLifecycle], &settings)
        .await;
    h.set_ready("n1", false).await;

    eventually("several failed lookups", WAIT, || async {
        (h.cloud.count(Operation::InstancesExist) >= 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert!(h.nodes().get_opt("n1").await.unwrap().is_some());
    h.stop().await;
}

#[tokio::test]
async fn the_shutdown_taint_follows_the_instance_and_readiness() {
    let mut h = harness_with_instances(&["n1"]).await;
    h.start(&[ControllerId::CloudNodeLifecycle], &fast_settings())
        .await;
    h.cloud.set_instance_state("n1", InstanceState::Stopped);
    h.set_ready("n1", false).await;
    eventually("shutdown taint added", WAIT, || async {
        h.nodes().get("n1").await.ok().filter(has_shutdown_taint)
    })
    .await
    .expect("a bounded wait");

    // The instance runs again while the node is still not Ready.
    h.cloud.set_instance_state("n1", InstanceState::Running);
    eventually("shutdown taint removed", WAIT, || async {
        h.nodes()
            .get("n1")
            .await
            .ok()
            .filter(|n| !has_shutdown_taint(n))
    })
    .await
    .expect("a bounded wait");

    // Stopped again, then Ready again: Ready removes the taint with no cloud call.
    h.cloud.set_instance_state("n1", InstanceState::Stopped);
    eventually("shutdown taint added again", WAIT, || async {
        h.nodes().get("n1").await.ok().filter(has_shutdown_taint)
    })
    .await
    .expect("a bounded wait");
    h.set_ready("n1", true).await;
    eventually("shutdown taint removed once Ready", WAIT, || async {
        h.nodes()
            .get("n1")
            .await
            .ok()
            .filter(|n| !has_shutdown_taint(n))
    })
    .await
    .expect("a bounded wait");
    h.stop().await;
}

#[tokio::test]
async fn checks_are_batched_and_ready_nodes_cost_nothing() {
    let names: Vec<String> = (0..50).map(|i| format!("n{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut h = harness_with_instances(&refs).await;
    h.cloud.set_batch_size(NonZeroUsize::new(100).unwrap());
    h.start(&[ControllerId::CloudNodeLifecycle], &fast_settings())
        .await;
    eventually("three monitor passes", WAIT, || async {
        (h.activity().passes >= 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert_eq!(h.cloud.calls().len(), 0, "all nodes Ready: no cloud calls");

    for name in &refs[..30] {
        h.set_ready(name, false).await;
    }
    eventually("a pass over the 30 not-Ready nodes", WAIT, || async {
        h.cloud
            .calls()
            .iter()
            .any(|c| c.op == Operation::InstancesExist && c.batch_size == Some(30))
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    assert!(
        h.cloud.calls().iter().all(|c| c.batch_size.is_some()),
        "only batch calls"
    );
    h.stop().await;
}

/// A fence that never lets this process act: it does not lead.
#[derive(Debug)]
struct NotLeading;

impl ccm_runtime::Fence for NotLeading {
    fn check(&self) -> Result<(), ccm_runtime::Fenced> {
        Err(ccm_runtime::Fenced::new("not the leader"))
    }
}

#[tokio::test]
async fn a_process_that_does_not_lead_never_deletes_a_node() {
    let mut h = harness_with_instances(&["n1"]).await;
    h.fence = Arc::new(NotLeading);
    h.start(&[ControllerId::CloudNodeLifecycle], &fast_settings())
        .await;
    h.cloud.set_instance_state("n1", InstanceState::Terminated);
    h.set_ready("n1", false).await;

    // Lookups are reads and go on; the deletion is fenced as it leaves.
    eventually("three lifecycle passes", WAIT, || async {
        (h.cloud.count(Operation::InstancesExist) >= 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert!(
        h.nodes().get_opt("n1").await.unwrap().is_some(),
        "the node of a gone instance stays while this process does not lead"
    );
    h.stop().await;
}

/// Upstream's `cloud_node_lifecycle_controller_cloud_provider_calls_total`
/// for `operation` and `result` (0 when absent).
fn cloud_calls(h: &Harness, operation: &str, result: &str) -> u64 {
    let prefix = format!(
        "cloud_node_lifecycle_controller_cloud_provider_calls_total{{operation=\"{operation}\",result=\"{result}\"}} "
    );
    h.metrics
        .encode(None)
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a counter value"))
}

/// Nodes the fake answered for in `op` calls.
fn nodes_asked(h: &Harness, op: Operation) -> u64 {
    h.cloud
        .calls()
        .iter()
        .filter(|c| c.op == op)
        .map(|c| c.batch_size.unwrap_or(1) as u64)
        .sum()
}

#[tokio::test]
async fn each_nodes_instance_answer_counts_once_by_result() {
    let mut h = harness_with_instances(&["gone", "stopped", "running", "ready"]).await;
    h.cloud.set_batch_size(NonZeroUsize::new(100).unwrap());
    h.cloud
        .set_instance_state("gone", InstanceState::Terminated);
    h.cloud
        .set_instance_state("stopped", InstanceState::Stopped);
    for name in ["gone", "stopped", "running"] {
        h.set_ready(name, false).await;
    }
    // Never seen Ready by this process: no grace, so gone goes at once.
    let mut settings = fast_settings();
    settings.new_node_grace = Duration::ZERO;
    h.start(&[ControllerId::CloudNodeLifecycle], &settings)
        .await;
    eventually("gone deleted and stopped tainted", WAIT, || async {
        let gone = h.nodes().get_opt("gone").await.ok()?.is_none();
        let stopped = h
            .nodes()
            .get("stopped")
            .await
            .ok()
            .filter(has_shutdown_taint);
        (gone && stopped.is_some()).then_some(())
    })
    .await
    .expect("a bounded wait");
    // One failed existence call: every node it asked about is an error.
    h.cloud.fail_next(
        Some(Operation::InstancesExist),
        InjectedError::Other("cloud API unavailable".into()),
        1,
    );
    eventually("a failed existence call counted", WAIT, || async {
        (cloud_calls(&h, "instance_exists", "error") > 0).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.stop().await;

    assert!(
        cloud_calls(&h, "instance_exists", "instance_not_found") >= 1,
        "gone: an existence check answering no"
    );
    assert!(
        cloud_calls(&h, "instance_exists", "error") >= 2,
        "stopped and running, both in the failed batch"
    );
    let exists: u64 = ["success", "instance_not_found", "error", "canceled"]
        .iter()
        .map(|result| cloud_calls(&h, "instance_exists", result))
        .sum();
    assert_eq!(
        exists,
        nodes_asked(&h, Operation::InstancesExist),
        "one per node answer"
    );
    let shutdown: u64 = ["success", "error", "canceled"]
        .iter()
        .map(|result| cloud_calls(&h, "instance_shutdown", result))
        .sum();
    assert!(
        cloud_calls(&h, "instance_shutdown", "success") > 0,
        "stopped and running were asked"
    );
    assert_eq!(
        shutdown,
        nodes_asked(&h, Operation::InstancesShutdown),
        "one per node answer"
    );
}

#[tokio::test]
async fn every_monitor_pass_is_observed_once_even_without_cloud_calls() {
    let mut h = harness_with_instances(&["n1"]).await;
    h.start(&[ControllerId::CloudNodeLifecycle], &fast_settings())
        .await;
    eventually("three monitor passes", WAIT, || async {
        (h.activity().passes >= 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.stop().await;
    assert!(h.cloud.calls().is_empty(), "a Ready node costs no call");

    let metrics = h.metrics.encode(None);
    let observed: u64 = metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix(
                "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_count ",
            )
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the histogram is exported: {metrics}"));
    let passes = h.activity().passes;
    // A pass cut short by the stop ends without being observed.
    assert!(
        (passes - 1..=passes).contains(&observed),
        "{observed} observed for {passes} passes"
    );
}
