//! The cloud-node-lifecycle controller against the test API server and the
//! fake cloud.

mod support;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_controllers::ControllerId;
use k8s_openapi::api::core::v1::Node;
use provider_fake::{FakeCloud, InjectedError, InstanceState, Operation};
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
    use cloud_provider::Instances;
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
