//! Tier-2 harness for controller tests: the real kube client against the
//! in-memory test API server over loopback, and the fake cloud.
#![allow(
    dead_code,
    unused_imports,
    reason = "each test file uses a different subset"
)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use ccm_test_support::{
    eventually, load_balancer_service, ready_condition, uninitialized_node,
};

use ccm_cloud_provider::CloudProvider;
use ccm_controllers::{ControllerId, ControllerSettings, Started};
use ccm_provider_fake::FakeCloud;
use ccm_runtime::{
    ActivitySnapshot, AlwaysLeader, Context, Fence, Informers, MeteredCloud, Metrics,
};
use ccm_test_apiserver::TestApiServer;
use ccm_test_support::Quiescence;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec,
    Taint,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A test API server, a fake cloud, and controllers started against them.
pub(crate) struct Harness {
    pub(crate) server: TestApiServer,
    pub(crate) client: kube::Client,
    pub(crate) cloud: FakeCloud,
    provider: Arc<dyn CloudProvider>,
    pub(crate) metrics: Metrics,
    /// Whether the controllers may change the cloud; always, unless a test
    /// sets another fence before starting them.
    pub(crate) fence: Arc<dyn Fence>,
    running: Option<(CancellationToken, Vec<JoinHandle<()>>)>,
}

impl Harness {
    /// A fresh API server and a fake cloud answering for any node name.
    pub(crate) async fn new() -> Self {
        let cloud = FakeCloud::default();
        cloud.set_auto_instances(true);
        Self::with_cloud(cloud).await
    }

    /// A fresh API server and the given cloud.
    pub(crate) async fn with_cloud(cloud: FakeCloud) -> Self {
        let provider = Arc::new(cloud.clone());
        Self::with_provider(cloud, provider).await
    }

    /// A fresh API server and `provider`, which wraps `cloud` (for tests that
    /// need a provider to answer differently from the fake).
    pub(crate) async fn with_provider(cloud: FakeCloud, provider: Arc<dyn CloudProvider>) -> Self {
        let server = TestApiServer::start()
            .await
            .expect("the test API server starts");
        let client = server.client();
        Self {
            server,
            client,
            cloud,
            provider,
            metrics: Metrics::new(),
            fence: Arc::new(AlwaysLeader),
            running: None,
        }
    }

    /// Starts `ids` with `settings`, as the app does: controllers subscribe,
    /// then the informers run; returns once the caches are filled.
    pub(crate) async fn start(&mut self, ids: &[ControllerId], settings: &ControllerSettings) {
        self.start_with(ids, settings, false).await;
    }

    /// Starts `ids` and the service-observer controller, as the app does
    /// when the provider observes Services.
    pub(crate) async fn start_observing(
        &mut self,
        ids: &[ControllerId],
        settings: &ControllerSettings,
    ) {
        self.start_with(ids, settings, true).await;
    }

    async fn start_with(
        &mut self,
        ids: &[ControllerId],
        settings: &ControllerSettings,
        observe_services: bool,
    ) {
        assert!(
            self.running.is_none(),
            "stop the controllers before starting them again"
        );
        let shutdown = CancellationToken::new();
        let ctx = Context {
            client: self.client.clone(),
            cloud: Arc::new(MeteredCloud::new(
                self.provider.clone(),
                self.metrics.clone(),
                self.fence.clone(),
            )),
            metrics: self.metrics.clone(),
            cluster_name: "test-cluster".into(),
            identity: "test-ccm".into(),
            informers: Arc::new(Informers::new(self.client.clone())),
            shutdown: shutdown.clone(),
        };
        let mut tasks = Vec::new();
        for id in ids {
            match ccm_controllers::start(*id, &ctx, settings) {
                Started::Running(future) => tasks.push(tokio::spawn(future)),
                Started::Off(reason) => panic!("{id} did not start: {reason}"),
            }
        }
        if observe_services {
            match ccm_controllers::start_service_observer(&ctx) {
                Started::Running(future) => tasks.push(tokio::spawn(future)),
                Started::Off(reason) => panic!("the service observer did not start: {reason}"),
            }
        }
        let informers = ctx.informers.clone();
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            informers.run(stop).await.expect("informers run once");
        }));
        tokio::time::timeout(Duration::from_secs(10), ctx.informers.wait_until_ready())
            .await
            .expect("caches fill within 10 s");
        self.running = Some((shutdown, tasks));
    }

    /// Stops the controllers (as when the CCM process stops).
    pub(crate) async fn stop(&mut self) {
        if let Some((shutdown, tasks)) = self.running.take() {
            shutdown.cancel();
            for task in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
            }
        }
    }

    pub(crate) fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    pub(crate) fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub(crate) async fn create_node(&self, node: &Node) -> Node {
        self.nodes()
            .create(&PostParams::default(), node)
            .await
            .expect("node created")
    }

    pub(crate) async fn create_service(&self, service: &Service) -> Service {
        self.services()
            .create(&PostParams::default(), service)
            .await
            .expect("service created")
    }

    /// Sets the node's Ready condition, as the kubelet's heartbeat does.
    pub(crate) async fn set_ready(&self, name: &str, ready: bool) {
        let condition = ready_condition(ready);
        let patch = serde_json::json!({ "status": { "conditions": [condition] } });
        self.nodes()
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .expect("node status patched");
    }

    /// What the controllers have done so far.
    pub(crate) fn activity(&self) -> ActivitySnapshot {
        self.metrics.activity().snapshot()
    }

    /// Waits until the controllers are quiescent: nothing queued or
    /// running, and reconciles, cloud calls (the fake's log too), API
    /// requests and the API server's resourceVersion unchanged across
    /// [`Quiescence::DEFAULT_WINDOW`]. Then a test can assert that something
    /// did not happen. Panics, saying what still moved, after 30 s.
    pub(crate) async fn settled(&self) -> ActivitySnapshot {
        Quiescence::new(self.metrics.activity())
            .counter("API requests", || self.server.stats().total())
            .counter("resourceVersion", || self.server.resource_version())
            .counter("fake cloud calls", || self.cloud.calls().len() as u64)
            .settled()
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Events with `reason` about the object named `name`.
    pub(crate) async fn events(&self, name: &str, reason: &str) -> Vec<Event> {
        let events: Api<Event> = Api::all(self.client.clone());
        events
            .list(&ListParams::default())
            .await
            .expect("events listed")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect()
    }
}

impl Drop for Harness {
    /// Stops controllers a test did not stop, so teardown does not wait on
    /// their open watches.
    fn drop(&mut self) {
        if let Some((shutdown, _)) = self.running.take() {
            shutdown.cancel();
        }
    }
}

/// An initialized, Ready node with the fake's provider ID.
pub(crate) fn ready_node(name: &str) -> Node {
    let mut node = uninitialized_node(name);
    let spec = node.spec.get_or_insert_with(NodeSpec::default);
    spec.taints = None;
    spec.provider_id = Some(format!("fake://{name}"));
    node.status
        .get_or_insert_with(NodeStatus::default)
        .conditions = Some(vec![ready_condition(true)]);
    node
}

/// Settings for fast tests: short periods, the rest upstream's defaults.
pub(crate) fn fast_settings() -> ControllerSettings {
    ControllerSettings {
        node_monitor_period: Duration::from_millis(200),
        route_reconciliation_period: Duration::from_secs(1),
        node_status_update_frequency: Duration::from_secs(3600),
        ..ControllerSettings::default()
    }
}
