//! A provider's own controllers (`tagging`, `nodeipam`) against the test API
//! server and the fake cloud offering instance tags and pod CIDRs:
//! batching, the label that spares tagged nodes, untagging on deletion, pod
//! CIDRs in upstream's order.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{ProviderController, ProviderControllerKind};
use ccm_controllers::{ControllerSettings, ProviderControllerSettings, Started};
use ccm_provider_fake::{FakeCloud, InjectedError, Operation};
use ccm_runtime::{AlwaysLeader, Context, Informers, MeteredCloud, Metrics};
use ccm_test_apiserver::TestApiServer;
use ccm_test_support::{Quiescence, eventually};
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
/// The label the tagging controller records a node's tags under.
const LABEL: &str = "example.com/tagged";
/// A serverless node's provider ID: never tagged, no prefix.
const FARGATE: &str = "fake://fargate-ip-10-0-0-1";

/// The fake cloud offering instance tags and pod CIDRs, `batch` provider
/// IDs a call.
fn cloud(batch: usize) -> FakeCloud {
    let cloud = FakeCloud::default();
    cloud.offer_instance_tags(LABEL);
    cloud.offer_pod_cidrs();
    cloud.set_batch_size(NonZeroUsize::new(batch).expect("above zero"));
    cloud.mark_serverless(FARGATE, "a Fargate node");
    cloud
}

/// Adds instance `i`, carrying `tags` and delegated `prefix`.
fn add_instance(cloud: &FakeCloud, i: usize, tags: &[(&str, &str)], prefix: Option<&str>) {
    let provider_id = cloud.add_running_instance(&format!("i-{i:04}"));
    let tags = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    cloud.set_instance_tags(&provider_id, tags);
    if let Some(prefix) = prefix {
        cloud.set_pod_prefix(&provider_id, prefix.parse().expect("a CIDR"));
    }
}

/// The batch sizes of `op`'s calls.
fn batches(cloud: &FakeCloud, op: Operation) -> Vec<usize> {
    cloud
        .calls()
        .iter()
        .filter(|c| c.op == op)
        .filter_map(|c| c.batch_size)
        .collect()
}

const TAGGING: ProviderController = ProviderController {
    name: "tagging",
    kind: ProviderControllerKind::InstanceTagging,
    metrics_prefix: "cloudprovider_test",
};
const NODEIPAM: ProviderController = ProviderController {
    name: "nodeipam",
    kind: ProviderControllerKind::NodeIpam,
    metrics_prefix: "cloudprovider_test",
};

struct Harness {
    server: TestApiServer,
    nodes: Api<Node>,
    cloud: FakeCloud,
    metrics: Metrics,
    shutdown: CancellationToken,
}

impl Harness {
    async fn new(cloud: FakeCloud) -> Self {
        let server = TestApiServer::start()
            .await
            .expect("the test API server starts");
        Self {
            nodes: Api::all(server.client()),
            server,
            cloud,
            metrics: Metrics::new(),
            shutdown: CancellationToken::new(),
        }
    }

    async fn start(
        &mut self,
        spec: &ProviderController,
        settings: &ControllerSettings,
        own: &ProviderControllerSettings,
    ) {
        self.shutdown.cancel();
        self.shutdown = CancellationToken::new();
        let client = self.server.client();
        let ctx = Context {
            client: client.clone(),
            cloud: Arc::new(MeteredCloud::new(
                Arc::new(self.cloud.clone()),
                self.metrics.clone(),
                Arc::new(AlwaysLeader),
            )),
            metrics: self.metrics.clone(),
            cluster_name: "test-cluster".into(),
            identity: "test-ccm".into(),
            informers: Arc::new(Informers::new(client)),
            shutdown: self.shutdown.clone(),
        };
        match ccm_controllers::start_provider_controller(spec, &ctx, settings, own) {
            Started::Running(future) => drop(tokio::spawn(future)),
            Started::Off(reason) => panic!("{} did not start: {reason}", spec.name),
        }
        let informers = ctx.informers.clone();
        let stop = self.shutdown.clone();
        tokio::spawn(async move { informers.run(stop).await.expect("informers run once") });
        tokio::time::timeout(Duration::from_secs(10), ctx.informers.wait_until_ready())
            .await
            .expect("caches fill within 10 s");
    }

    async fn create(&self, name: &str, provider_id: Option<&str>, pod_cidrs: &[&str]) {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_owned),
                pod_cidr: pod_cidrs.first().map(|c| (*c).to_owned()),
                pod_cidrs: (!pod_cidrs.is_empty())
                    .then(|| pod_cidrs.iter().map(|c| (*c).to_owned()).collect()),
                ..NodeSpec::default()
            }),
            ..Node::default()
        };
        self.nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("node created");
    }

    async fn pod_cidrs(&self, name: &str) -> Vec<String> {
        let node = self.nodes.get(name).await.expect("node read");
        node.spec.and_then(|s| s.pod_cidrs).unwrap_or_default()
    }

    async fn label(&self, name: &str) -> Option<String> {
        let node = self.nodes.get(name).await.expect("node read");
        node.metadata.labels.and_then(|l| l.get(LABEL).cloned())
    }

    /// Nothing queued or running, and no call or request for a while.
    async fn settled(&self) {
        Quiescence::new(self.metrics.activity())
            .counter("API requests", || self.server.stats().total())
            .counter("cloud calls", || self.cloud.calls().len() as u64)
            .settled()
            .await
            .unwrap_or_else(|err| panic!("{err}"));
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn tags() -> ProviderControllerSettings {
    ProviderControllerSettings {
        tags: BTreeMap::from([
            ("team".to_owned(), "platform".to_owned()),
            ("cost-center".to_owned(), "42".to_owned()),
        ]),
        ..ProviderControllerSettings::default()
    }
}

fn pid(i: usize) -> String {
    format!("fake://i-{i:04}")
}

#[tokio::test]
async fn a_thousand_nodes_joining_together_cost_one_tag_call_and_are_labelled() {
    const NODES: usize = 1000;
    let cloud = cloud(1000);
    for i in 0..NODES {
        add_instance(&cloud, i, &[("Name", "worker")], None);
    }
    let mut h = Harness::new(cloud.clone()).await;
    // They joined while no controller ran: the burst arrives at once.
    for i in 0..NODES {
        h.create(&format!("node-{i}"), Some(&pid(i)), &[]).await;
    }
    h.start(&TAGGING, &ControllerSettings::default(), &tags())
        .await;
    eventually("every instance tagged", WAIT, || async {
        (0..NODES)
            .all(|i| cloud.instance_tags(&pid(i)).len() == 3)
            .then_some(())
    })
    .await
    .unwrap();
    h.settled().await;
    let calls = batches(&cloud, Operation::TagInstances);
    println!(
        "figure: {NODES} joining nodes: {} tag calls {calls:?}",
        calls.len()
    );
    assert_eq!(calls, [NODES], "one call for the whole burst");
    // Upstream's checksum of the tags: a restart does not tag again.
    assert_eq!(
        h.label("node-7").await.as_deref(),
        Some("6f52f4973ed001170dfb8ad1ef0f40dc")
    );
    h.start(&TAGGING, &ControllerSettings::default(), &tags())
        .await;
    h.settled().await;
    assert_eq!(
        batches(&cloud, Operation::TagInstances).len(),
        1,
        "labelled nodes cost no call"
    );
}

#[tokio::test]
async fn a_deleted_node_loses_exactly_the_tags_from_its_instance_only() {
    let cloud = cloud(1000);
    add_instance(&cloud, 1, &[("owner", "alice")], None);
    add_instance(&cloud, 2, &[("owner", "bob")], None);
    let mut h = Harness::new(cloud.clone()).await;
    h.start(&TAGGING, &ControllerSettings::default(), &tags())
        .await;
    h.create("node-1", Some(&pid(1)), &[]).await;
    h.create("node-2", Some(&pid(2)), &[]).await;
    h.create("no-provider-id", None, &[]).await;
    h.create("fargate", Some(FARGATE), &[]).await;
    eventually("both labelled", WAIT, || async {
        (h.label("node-1").await.is_some() && h.label("node-2").await.is_some()).then_some(())
    })
    .await
    .unwrap();
    h.nodes
        .delete("node-1", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually("node-1's instance untagged", WAIT, || async {
        (cloud.instance_tags(&pid(1)).len() == 1).then_some(())
    })
    .await
    .unwrap();
    h.settled().await;
    assert_eq!(
        cloud.instance_tags(&pid(1)),
        BTreeMap::from([("owner".to_owned(), "alice".to_owned())])
    );
    assert_eq!(
        cloud.instance_tags(&pid(2)).len(),
        3,
        "the other instance keeps its tags"
    );
    assert_eq!(h.label("no-provider-id").await, None);
    assert_eq!(
        h.label("fargate").await,
        None,
        "a Fargate node is not labelled"
    );
    assert_eq!(batches(&cloud, Operation::UntagInstances), [1]);
}

#[tokio::test]
async fn an_ipv6_node_gets_its_prefix_and_a_node_with_pod_cidrs_costs_nothing() {
    let cloud = cloud(200);
    for i in 0..300 {
        add_instance(&cloud, i, &[], Some(&format!("2600:1f14:{i:x}:8000::/80")));
    }
    let mut h = Harness::new(cloud.clone()).await;
    h.create("has-cidrs", Some(&pid(999)), &["fd00:1::/80"])
        .await;
    for i in 0..300 {
        h.create(&format!("node-{i}"), Some(&pid(i)), &[]).await;
    }
    h.create("fargate", Some(FARGATE), &[]).await;
    h.start(
        &NODEIPAM,
        &ControllerSettings::default(),
        &ProviderControllerSettings::default(),
    )
    .await;
    eventually("every node has a pod CIDR", WAIT, || async {
        let list = h.nodes.list(&Default::default()).await.ok()?;
        let done = list
            .items
            .iter()
            .filter(|n| n.spec.as_ref().is_some_and(|s| s.pod_cidrs.is_some()))
            .count();
        (done == 301).then_some(())
    })
    .await
    .unwrap();
    h.settled().await;
    assert_eq!(h.pod_cidrs("node-17").await, ["2600:1f14:11:8000::/80"]);
    assert_eq!(h.pod_cidrs("has-cidrs").await, ["fd00:1::/80"]);
    assert!(h.pod_cidrs("fargate").await.is_empty());
    let calls = batches(&cloud, Operation::PodCidrsOf);
    assert_eq!(
        calls.iter().sum::<usize>(),
        301,
        "the node with pod CIDRs is not looked up: {calls:?}"
    );
    assert_eq!(calls.len(), 301usize.div_ceil(200), "batched: {calls:?}");
}

#[tokio::test]
async fn a_dual_stack_node_gets_an_ipv4_range_then_its_prefix() {
    let cloud = cloud(200);
    add_instance(&cloud, 1, &[], Some("2600:1f14:1:8000::/80"));
    let mut h = Harness::new(cloud.clone()).await;
    h.create(
        "old",
        Some(&pid(0)),
        &["10.244.0.0/24", "2600:1f14:0:8000::/80"],
    )
    .await;
    let settings = ControllerSettings {
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        ..ControllerSettings::default()
    };
    let own = ProviderControllerSettings {
        dual_stack: true,
        ..ProviderControllerSettings::default()
    };
    h.start(&NODEIPAM, &settings, &own).await;
    h.create("new", Some(&pid(1)), &[]).await;
    let cidrs = eventually("the new node has pod CIDRs", WAIT, || async {
        let cidrs = h.pod_cidrs("new").await;
        (!cidrs.is_empty()).then_some(cidrs)
    })
    .await
    .unwrap();
    assert_eq!(
        cidrs,
        ["10.244.1.0/24", "2600:1f14:1:8000::/80"],
        "IPv4 first, the old node's range skipped"
    );
}

#[tokio::test]
async fn a_throttled_tag_call_is_retried_after_the_clouds_delay_and_counts_no_error() {
    let cloud = cloud(1000);
    add_instance(&cloud, 1, &[], None);
    let throttled = InjectedError::Throttled {
        retry_after: Duration::from_millis(100),
    };
    cloud.fail_next(Some(Operation::TagInstances), throttled, 2);
    let mut h = Harness::new(cloud.clone()).await;
    h.create("node-1", Some(&pid(1)), &[]).await;
    h.start(&TAGGING, &ControllerSettings::default(), &tags())
        .await;
    eventually("tagged once the cloud lets it", WAIT, || async {
        h.label("node-1").await.map(|_| ())
    })
    .await
    .unwrap();
    assert_eq!(
        batches(&cloud, Operation::TagInstances).len(),
        3,
        "two throttled, then tagged"
    );
    assert_eq!(cloud.instance_tags(&pid(1)).len(), 2);
    let metrics = h.metrics.encode(None);
    assert!(
        !metrics.contains("cloudprovider_test_tagging_controller_work_item_errors_total{"),
        "throttling is no work-item error: {metrics}"
    );
}

#[tokio::test]
async fn with_every_ipv4_range_taken_a_dual_stack_node_gets_cidr_not_available() {
    let cloud = cloud(200);
    add_instance(&cloud, 1, &[], Some("2600:1f14:1:8000::/80"));
    let mut h = Harness::new(cloud.clone()).await;
    h.create(
        "old",
        Some(&pid(0)),
        &["10.244.0.0/24", "2600:1f14:0:8000::/80"],
    )
    .await;
    let settings = ControllerSettings {
        // One /24 range in all, which the old node holds.
        cluster_cidrs: vec!["10.244.0.0/24".parse().unwrap()],
        ..ControllerSettings::default()
    };
    let own = ProviderControllerSettings {
        dual_stack: true,
        ..ProviderControllerSettings::default()
    };
    h.start(&NODEIPAM, &settings, &own).await;
    h.create("new", Some(&pid(1)), &[]).await;
    let events: Api<Event> = Api::all(h.server.client());
    eventually(
        "a CIDRNotAvailable Warning on the new node",
        WAIT,
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("CIDRNotAvailable")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("new")
                })
                .map(|e| assert_eq!(e.type_.as_deref(), Some("Warning")))
        },
    )
    .await
    .unwrap();
    assert!(h.pod_cidrs("new").await.is_empty(), "no half assignment");
}
