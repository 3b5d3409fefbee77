//! What the route table becomes: create, delete, stale, blackhole,
//! dual-stack, and what is never touched; and when the controller is off.

use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::CloudProvider;
use ccm_controllers::{ControllerId, ControllerSettings, Started};
use ccm_provider_fake::{Capability, FakeCloud, InjectedError, Operation};
use ccm_runtime::{Context, Fence, Fenced, Informers, MeteredCloud, Metrics};
use ccm_test_support::cloud_call_count;
use k8s_openapi::api::core::v1::Node;

use super::{
    CLUSTER, HOUR, WAIT, condition, node, plant, route, route_settings, table, wait_for_condition,
    wait_for_table,
};
use crate::support::{Harness, eventually};

#[tokio::test]
async fn missing_routes_are_created_to_their_node() {
    let mut h = Harness::new().await;
    let created = h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.create_node(&node("n2", &["10.244.2.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    wait_for_table(
        &h,
        &[
            ("10.244.1.0/24", "n1", false),
            ("10.244.2.0/24", "n2", false),
        ],
    )
    .await;
    let owned = h
        .cloud
        .routes()
        .into_iter()
        .find(|r| r.route.target_node == "n1")
        .unwrap();
    assert_eq!(owned.cluster_name, CLUSTER);
    assert_eq!(
        Some(owned.route.name),
        created.metadata.uid,
        "upstream's name hint: the node's UID"
    );
    assert_eq!(owned.route.target_provider_id.as_deref(), Some("fake://n1"));
    assert_eq!(
        h.cloud.count(Operation::ListRoutes),
        1,
        "one list for the pass"
    );
    assert_eq!(h.cloud.count(Operation::CreateRoute), 2);
    assert_eq!(h.cloud.count(Operation::DeleteRoute), 0);
    h.stop().await;
}

#[tokio::test]
async fn routes_of_a_deleted_node_are_deleted() {
    let mut h = Harness::new().await;
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.create_node(&node("n2", &["10.244.2.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;
    wait_for_table(
        &h,
        &[
            ("10.244.1.0/24", "n1", false),
            ("10.244.2.0/24", "n2", false),
        ],
    )
    .await;

    h.nodes()
        .delete("n2", &Default::default())
        .await
        .expect("node deleted");
    wait_for_table(&h, &[("10.244.1.0/24", "n1", false)]).await;
    assert_eq!(h.cloud.count(Operation::DeleteRoute), 1);
    h.stop().await;
}

#[tokio::test]
async fn stale_routes_are_deleted_and_a_cidr_moved_to_another_node_is_rerouted() {
    let mut h = Harness::new().await;
    // Working routes: to a node that is gone, and n1's CIDR still sent to
    // a node that gave it up.
    plant(&h, "gone", "10.244.9.0/24").await;
    plant(&h, "old", "10.244.1.0/24").await;
    h.cloud.clear_calls();
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.create_node(&node("old", &["10.244.3.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    wait_for_table(
        &h,
        &[
            ("10.244.1.0/24", "n1", false),
            ("10.244.3.0/24", "old", false),
        ],
    )
    .await;
    let mutations: Vec<_> = h
        .cloud
        .calls()
        .into_iter()
        .filter(|c| c.op.is_mutation())
        .collect();
    let moved = |op| {
        mutations
            .iter()
            .position(|c| c.op == op && c.args[0] == "10.244.1.0/24")
    };
    assert!(
        moved(Operation::DeleteRoute) < moved(Operation::CreateRoute),
        "the old route goes first: {mutations:?}"
    );
    assert_eq!(h.cloud.count(Operation::DeleteRoute), 2);
    h.stop().await;
}

#[tokio::test]
async fn blackhole_routes_are_deleted_and_replaced_when_still_wanted() {
    let mut h = Harness::new().await;
    // A blackhole for a node that no longer exists, and one whose node still
    // wants its CIDR (its instance was replaced).
    h.cloud
        .insert_route(CLUSTER, route("ghost", "10.244.7.0/24", true));
    h.cloud
        .insert_route(CLUSTER, route("n1", "10.244.1.0/24", true));
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    wait_for_table(&h, &[("10.244.1.0/24", "n1", false)]).await;
    assert_eq!(h.cloud.count(Operation::DeleteRoute), 2);
    assert_eq!(h.cloud.count(Operation::CreateRoute), 1);
    h.stop().await;
}

#[tokio::test]
async fn a_route_the_cloud_lists_as_blackhole_is_deleted() {
    let mut h = Harness::new().await;
    // A route to a node without an instance: the fake lists it as a
    // blackhole although it was stored as a working route.
    h.cloud
        .insert_route(CLUSTER, route("ghost", "10.244.7.0/24", false));
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    wait_for_table(&h, &[("10.244.1.0/24", "n1", false)]).await;
    assert_eq!(h.cloud.count(Operation::DeleteRoute), 1);
    h.stop().await;
}

#[tokio::test]
async fn dual_stack_nodes_get_one_route_per_family() {
    let mut h = Harness::new().await;
    h.create_node(&node("n1", &["10.244.1.0/24", "fd00:10:244:1::/64"]))
        .await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    wait_for_table(
        &h,
        &[
            ("10.244.1.0/24", "n1", false),
            ("fd00:10:244:1::/64", "n1", false),
        ],
    )
    .await;
    let network = wait_for_condition(&h, "n1", "False").await;
    assert_eq!(network.reason.as_deref(), Some("RouteCreated"));
    h.stop().await;
}

#[tokio::test]
async fn routes_outside_the_cluster_cidr_or_of_other_clusters_are_never_touched() {
    let mut h = Harness::new().await;
    // Outside the cluster CIDR: another node's, a blackhole, one to nowhere.
    h.cloud
        .insert_route(CLUSTER, route("n1", "192.168.0.0/24", false));
    h.cloud
        .insert_route(CLUSTER, route("ghost", "172.16.0.0/24", true));
    h.cloud
        .insert_route(CLUSTER, route("vpc", "10.0.0.0/8", false));
    // Another cluster's, inside our CIDR.
    h.cloud
        .insert_route("other-cluster", route("ghost", "10.244.200.0/24", true));
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.start(
        &[ControllerId::Route],
        &route_settings(Duration::from_millis(300)),
    )
    .await;

    wait_for_table(
        &h,
        &[
            ("10.244.1.0/24", "n1", false),
            ("192.168.0.0/24", "n1", false),
            ("172.16.0.0/24", "ghost", true),
            ("10.0.0.0/8", "vpc", false),
        ],
    )
    .await;
    eventually("several passes", WAIT, || async {
        (h.cloud.count(Operation::ListRoutes) >= 3).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert_eq!(h.cloud.count(Operation::DeleteRoute), 0);
    assert_eq!(
        h.cloud.routes().len(),
        5,
        "the other cluster's route is still there"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_pod_cidr_outside_the_cluster_cidr_gets_no_route_and_a_warning() {
    let mut h = Harness::new().await;
    // One pod CIDR per family, as kube-apiserver allows: the IPv6 one lies
    // outside the cluster's IPv6 CIDR.
    h.create_node(&node("n1", &["10.244.1.0/24", "fd00:99::/64"]))
        .await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    let network = wait_for_condition(&h, "n1", "True").await;
    assert_eq!(network.reason.as_deref(), Some("NoRouteCreated"));
    assert_eq!(
        table(&h),
        [("10.244.1.0/24".to_owned(), "n1".to_owned(), false)].into()
    );
    let events = eventually("a FailedToCreateRoute event", WAIT, || async {
        Some(h.events("n1", "FailedToCreateRoute").await).filter(|e| !e.is_empty())
    })
    .await
    .expect("a bounded wait");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("fd00:99::/64") && note.contains("--cluster-cidr"),
        "{note}"
    );
    h.stop().await;
}

/// Upstream 1.35's reference: a failed create is reported on the `v1` Node
/// by its real UID, where upstream used to put the node's name.
#[tokio::test]
async fn a_failed_create_is_reported_on_the_v1_node_by_its_uid() {
    let mut h = Harness::new().await;
    // An error no retry can fix, so the pass reports it.
    h.cloud
        .fail_next(Some(Operation::CreateRoute), InjectedError::NotFound, 1);
    let created = h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    assert!(created.metadata.uid.is_some(), "the API server gives a UID");
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    let events = eventually("a FailedToCreateRoute event", WAIT, || async {
        Some(h.events("n1", "FailedToCreateRoute").await).filter(|e| !e.is_empty())
    })
    .await
    .expect("a bounded wait");
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("10.244.1.0/24 for node n1"), "{note}");
    let regarding = events[0]
        .regarding
        .clone()
        .expect("the event regards the node");
    assert_eq!(regarding.api_version.as_deref(), Some("v1"));
    assert_eq!(regarding.kind.as_deref(), Some("Node"));
    assert_eq!(regarding.name.as_deref(), Some("n1"));
    assert_eq!(
        regarding.uid, created.metadata.uid,
        "the node's UID, not its name"
    );
    h.stop().await;
}

/// Refuses every mutation, as when this process may have lost its lease.
#[derive(Debug)]
struct NotLeader;

impl Fence for NotLeader {
    fn check(&self) -> Result<(), Fenced> {
        Err(Fenced::new("not the leader"))
    }
}

fn context(h: &Harness, provider: Arc<dyn CloudProvider>, fence: Arc<dyn Fence>) -> Context {
    let metrics = Metrics::new();
    Context {
        client: h.client.clone(),
        cloud: Arc::new(MeteredCloud::new(provider, metrics.clone(), fence)),
        metrics,
        cluster_name: CLUSTER.into(),
        identity: "test-ccm".into(),
        informers: Arc::new(Informers::new(h.client.clone())),
        shutdown: Default::default(),
    }
}

#[tokio::test]
async fn a_fenced_process_never_changes_the_cloud() {
    let h = Harness::new().await;
    h.cloud
        .insert_route(CLUSTER, route("ghost", "10.244.9.0/24", true));
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    let ctx = context(&h, Arc::new(h.cloud.clone()), Arc::new(NotLeader));
    let Started::Running(controller) =
        ccm_controllers::start(ControllerId::Route, &ctx, &route_settings(HOUR))
    else {
        panic!("the route controller should run");
    };
    let informers = ctx.informers.clone();
    let tasks = [
        tokio::spawn(controller),
        tokio::spawn(async move { informers.run(Default::default()).await.unwrap() }),
    ];

    let fenced = |op| cloud_call_count(&ctx.metrics, op, "fenced");
    eventually("a fenced create and delete", WAIT, || async {
        (fenced("create_route") > 0 && fenced("delete_route") > 0).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        h.cloud.count(Operation::ListRoutes),
        1,
        "reads are not fenced"
    );
    assert_eq!(h.cloud.mutation_count(), 0, "{:?}", h.cloud.calls());
    assert_eq!(h.cloud.routes().len(), 1);
    tasks.iter().for_each(tokio::task::JoinHandle::abort);
}

#[tokio::test]
async fn it_runs_with_configure_cloud_routes_and_a_routes_capability() {
    let h = Harness::new().await;
    let fake = || -> Arc<dyn CloudProvider> { Arc::new(FakeCloud::default()) };
    let off = |provider: Arc<dyn CloudProvider>, settings: ControllerSettings| {
        match ccm_controllers::start(
            ControllerId::Route,
            &context(&h, provider, Arc::new(ccm_runtime::AlwaysLeader)),
            &settings,
        ) {
            Started::Off(reason) => reason,
            Started::Running(_) => panic!("should be off with {settings:?}"),
        }
    };
    let on = route_settings(HOUR);
    let reason = off(
        fake(),
        ControllerSettings {
            configure_cloud_routes: false,
            ..on.clone()
        },
    );
    assert!(
        reason.contains("--configure-cloud-routes=false"),
        "{reason}"
    );
    let no_routes = FakeCloud::default();
    no_routes.set_capability(Capability::Routes, false);
    let reason = off(Arc::new(no_routes), on.clone());
    assert!(reason.contains("does not support routes"), "{reason}");
    assert!(matches!(
        ccm_controllers::start(
            ControllerId::Route,
            &context(&h, fake(), Arc::new(ccm_runtime::AlwaysLeader)),
            &on
        ),
        Started::Running(_)
    ));
    let reason = off(
        fake(),
        ControllerSettings {
            cluster_cidrs: Vec::new(),
            ..on
        },
    );
    assert!(reason.contains("--cluster-cidr"), "{reason}");
}

#[tokio::test]
async fn condition_reports_routes_created_and_keeps_the_kubelets_conditions() {
    let mut h = Harness::new().await;
    h.create_node(&node("n1", &["10.244.1.0/24"])).await;
    h.start(&[ControllerId::Route], &route_settings(HOUR)).await;

    let network = wait_for_condition(&h, "n1", "False").await;
    assert_eq!(network.reason.as_deref(), Some("RouteCreated"));
    assert_eq!(
        network.message.as_deref(),
        Some("RouteController created a route")
    );
    assert!(network.last_transition_time.is_some() && network.last_heartbeat_time.is_some());
    let node: Node = h.nodes().get("n1").await.unwrap();
    assert_eq!(
        condition(&node, "Ready").map(|c| c.status),
        Some("True".into()),
        "the kubelet's condition is kept"
    );
    h.stop().await;
}
