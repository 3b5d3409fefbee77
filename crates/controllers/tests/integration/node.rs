//! The cloud-node controller against the test API server and the fake cloud.

use crate::support;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::time::Duration;

use ccm_cloud_provider::{NodeAddress as CloudAddress, NodeAddressType};
use ccm_controllers::ControllerId;
use ccm_provider_fake::{FakeCloud, Instance, InstanceState, Operation};
use k8s_openapi::api::core::v1::{Node, NodeAddress, Taint};
use kube::api::{Patch, PatchParams};
use support::{Harness, eventually, fast_settings, uninitialized_node};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const WAIT: Duration = Duration::from_secs(10);

fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| t.key.clone())
        .collect()
}

fn is_initialized(node: &Node) -> bool {
    !taint_keys(node).iter().any(|k| k == UNINITIALIZED)
}

async fn wait_initialized(h: &Harness, name: &str) -> Node {
    eventually(&format!("{name} initialized"), WAIT, || async {
        h.nodes().get(name).await.ok().filter(is_initialized)
    })
    .await
    .expect("a bounded wait")
}

fn seeded(name: &str, addresses: &[(NodeAddressType, &str)]) -> Instance {
    Instance {
        name: name.into(),
        provider_id: format!("fake:///zone-a/{name}"),
        instance_type: "fake.large".into(),
        zone: "zone-a".into(),
        region: "region-1".into(),
        addresses: addresses
            .iter()
            .map(|(k, a)| CloudAddress::new(*k, *a))
            .collect(),
        state: InstanceState::Running,
        labels: BTreeMap::from([("fake.example/rack".to_owned(), "r7".to_owned())]),
    }
}

#[tokio::test]
async fn uninitialized_node_gets_provider_id_labels_addresses_and_loses_its_taint() {
    let cloud = FakeCloud::default();
    cloud.add_instance(seeded(
        "n1",
        &[
            (NodeAddressType::InternalIp, "10.0.0.1"),
            (NodeAddressType::InternalIp, "fd00::1"),
        ],
    ));
    let mut h = Harness::with_cloud(cloud).await;
    h.create_node(&uninitialized_node("n1")).await;
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;

    let node = wait_initialized(&h, "n1").await;
    let spec = node.spec.as_ref().unwrap();
    assert_eq!(spec.provider_id.as_deref(), Some("fake:///zone-a/n1"));
    let labels = node.metadata.labels.as_ref().unwrap();
    for (key, value) in [
        ("node.kubernetes.io/instance-type", "fake.large"),
        ("beta.kubernetes.io/instance-type", "fake.large"),
        ("topology.kubernetes.io/zone", "zone-a"),
        ("failure-domain.beta.kubernetes.io/zone", "zone-a"),
        ("topology.kubernetes.io/region", "region-1"),
        ("failure-domain.beta.kubernetes.io/region", "region-1"),
        ("fake.example/rack", "r7"),
        ("kubernetes.io/hostname", "n1"),
    ] {
        assert_eq!(
            labels.get(key).map(String::as_str),
            Some(value),
            "label {key}"
        );
    }
    let addresses: Vec<_> = node
        .status
        .unwrap()
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        [
            ("InternalIP".to_owned(), "10.0.0.1".to_owned()),
            ("InternalIP".to_owned(), "fd00::1".to_owned()),
            ("Hostname".to_owned(), "n1".to_owned()),
        ],
        "cloud addresses in dual-stack order, the kubelet's Hostname kept"
    );
    // The initialization latency (creation to taint removed) was observed.
    let metrics = h.metrics.encode(None);
    let observed = metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix("node_controller_cloud_provider_taint_removal_delay_seconds_count ")
        })
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert_eq!(observed, Some(1), "{metrics}");
    h.stop().await;
}

#[tokio::test]
async fn taint_removed_only_after_addresses_set_in_two_writes() {
    let mut h = Harness::new().await;
    h.create_node(&uninitialized_node("n1")).await;
    h.server.reset_stats();
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;
    wait_initialized(&h, "n1").await;

    let writes: Vec<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| {
            r.resource == "nodes"
                && matches!(r.verb.as_str(), "patch" | "update" | "create" | "delete")
        })
        .map(|r| (r.verb, r.subresource))
        .collect();
    assert_eq!(
        writes,
        [
            ("patch".to_owned(), "status".to_owned()),
            ("patch".to_owned(), String::new())
        ]
    );
    h.stop().await;
}

/// The cloud-node controller running on node `n1`, its cloud lookup (1.5 s)
/// in flight. The node already has the cloud's addresses, so the
/// controller's only write will be the node patch, based on its (soon
/// stale) cached copy.
async fn initializing_with_a_slow_lookup() -> Harness {
    let cloud = FakeCloud::default();
    cloud.add_instance(seeded("n1", &[(NodeAddressType::Hostname, "n1")]));
    cloud.set_latency(Duration::from_millis(1500));
    let mut h = Harness::with_cloud(cloud).await;
    h.create_node(&uninitialized_node("n1")).await;
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;
    eventually("the controller's lookup in flight", WAIT, || async {
        (h.cloud.count(Operation::InstancesMetadata) == 1).then_some(())
    })
    .await
    .expect("a bounded wait");
    h
}

#[tokio::test]
async fn a_taint_another_writer_adds_meanwhile_is_kept() {
    let mut h = initializing_with_a_slow_lookup().await;
    // While the controller waits on the cloud, another writer adds a taint.
    let mut taints = h
        .nodes()
        .get("n1")
        .await
        .unwrap()
        .spec
        .unwrap()
        .taints
        .unwrap();
    taints.push(Taint {
        key: "example.com/maintenance".into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    });
    let patch = serde_json::json!({ "spec": { "taints": taints } });
    h.nodes()
        .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    let node = wait_initialized(&h, "n1").await;
    assert_eq!(
        taint_keys(&node),
        ["example.com/maintenance"],
        "the other writer's taint survives"
    );
    let refused = h
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.verb == "patch" && r.status == 422)
        .count();
    assert_eq!(
        refused, 1,
        "the stale write was refused once, then redone on a fresh read"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_status_write_meanwhile_does_not_refuse_the_nodes_initialization() {
    let mut h = initializing_with_a_slow_lookup().await;
    // While the controller waits on the cloud, the route controller (say)
    // writes the node's status: the cached copy's resourceVersion is stale,
    // but nothing the initialization overwrites changed.
    let condition = serde_json::json!({ "status": { "conditions": [{
        "type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"
    }] } });
    h.nodes()
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(&condition))
        .await
        .unwrap();

    let node = wait_initialized(&h, "n1").await;
    assert!(taint_keys(&node).is_empty());
    let refused = h
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.verb == "patch" && r.status >= 400)
        .count();
    let rereads = h
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.verb == "list" && r.query.contains("fieldSelector"))
        .count();
    assert_eq!((refused, rereads), (0, 0), "one write, accepted as sent");
    h.stop().await;
}

#[tokio::test]
async fn provided_node_ip_matching_no_cloud_address_keeps_the_taint_with_a_warning() {
    let cloud = FakeCloud::default();
    cloud.add_instance(seeded("n1", &[(NodeAddressType::InternalIp, "10.0.0.1")]));
    let mut h = Harness::with_cloud(cloud).await;
    let mut node = uninitialized_node("n1");
    node.metadata.annotations = Some(BTreeMap::from([(
        "alpha.kubernetes.io/provided-node-ip".to_owned(),
        "10.9.9.9".to_owned(),
    )]));
    h.create_node(&node).await;
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;

    let events = eventually("a Warning event", WAIT, || async {
        let events = h.events("n1", "NodeAddressesInvalid").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(events[0].note.as_deref().unwrap().contains("10.9.9.9"));
    let node = h.nodes().get("n1").await.unwrap();
    assert!(!is_initialized(&node), "the taint stays");
    assert_eq!(node.spec.unwrap().provider_id, None, "nothing was written");
    h.stop().await;
}

#[tokio::test]
async fn instance_not_found_keeps_the_taint_warns_and_backs_off() {
    // No auto instances: the cloud has no instance for the node.
    let mut h = Harness::with_cloud(FakeCloud::default()).await;
    h.create_node(&uninitialized_node("ghost")).await;
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;

    eventually("a Warning event", WAIT, || async {
        (!h.events("ghost", "InstanceNotFound").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    // The retry is scheduled (after 5 s: the runtime's backoff, tested on
    // the paused clock there), not run in a tight loop.
    let settled = h.settled().await;
    assert_eq!(settled.retrying, 1, "a retry is scheduled");
    let lookups =
        h.cloud.count(Operation::InstancesMetadata) + h.cloud.count(Operation::InstanceMetadata);
    assert_eq!(lookups, 1, "no tight retry loop");
    assert!(!is_initialized(&h.nodes().get("ghost").await.unwrap()));

    // Once the instance exists, the next retry (at 5 s) initializes the node.
    h.cloud.set_auto_instances(true);
    let node = wait_initialized(&h, "ghost").await;
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some("fake://ghost")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_different_provider_id_is_never_overwritten() {
    // The node was registered with n1's ID; the instance answering for it
    // now reports another (a node re-pointed at another instance).
    let mut h = Harness::new().await;
    let mut moved = seeded("n1", &[(NodeAddressType::InternalIp, "10.0.0.1")]);
    moved.provider_id = "fake://somewhere-else".into();
    h.cloud.add_instance(moved);
    h.cloud.answer_for("fake://n1", "n1");
    let mut node = uninitialized_node("n1");
    node.spec.as_mut().unwrap().provider_id = Some("fake://n1".into());
    h.create_node(&node).await;
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;

    let events = eventually("a Warning event", WAIT, || async {
        let events = h.events("n1", "ProviderIDMismatch").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap()
            .contains("fake://somewhere-else")
    );
    let node = h.nodes().get("n1").await.unwrap();
    assert_eq!(
        node.spec.as_ref().unwrap().provider_id.as_deref(),
        Some("fake://n1"),
        "never overwritten"
    );
    assert!(!is_initialized(&node), "the taint stays");
    h.stop().await;
}

#[tokio::test]
async fn a_burst_of_1000_nodes_costs_ceil_n_over_batch_lookups_and_two_writes_each() {
    let mut h = Harness::new().await;
    h.cloud.set_batch_size(NonZeroUsize::new(100).unwrap());
    for i in 0..1000 {
        h.create_node(&uninitialized_node(&format!("node-{i}")))
            .await;
    }
    h.server.reset_stats();
    h.start(&[ControllerId::CloudNode], &fast_settings()).await;

    eventually(
        "all 1000 nodes initialized",
        Duration::from_secs(120),
        || async {
            let nodes = h.nodes().list(&Default::default()).await.ok()?;
            nodes.items.iter().all(is_initialized).then_some(())
        },
    )
    .await
    .expect("a bounded wait");
    let metadata_calls =
        h.cloud.count(Operation::InstancesMetadata) + h.cloud.count(Operation::InstanceMetadata);
    assert!(
        metadata_calls <= 10,
        "{metadata_calls} metadata calls for 1000 nodes with batch 100"
    );
    // Writes to the Node and to nodes/status alike, per node, from the log.
    let mut writes_per_node: BTreeMap<String, u32> = BTreeMap::new();
    for record in h.server.requests() {
        let read = matches!(record.verb.as_str(), "get" | "list" | "watch");
        if record.resource == "nodes" && !read {
            *writes_per_node.entry(record.name).or_default() += 1;
        }
    }
    assert_eq!(writes_per_node.len(), 1000, "every node was written");
    let most = writes_per_node.values().max().copied().unwrap_or(0);
    assert!(most <= 2, "a node took {most} writes; at most 2 allowed");
    assert_eq!(
        u64::from(writes_per_node.values().sum::<u32>()),
        h.server.stats().writes("nodes"),
        "the log saw every write the counters saw"
    );
    h.stop().await;
}

#[tokio::test]
async fn periodic_refresh_writes_only_nodes_whose_cloud_data_changed() {
    let cloud = FakeCloud::default();
    cloud.add_instance(seeded("a", &[(NodeAddressType::InternalIp, "10.0.0.1")]));
    cloud.add_instance(seeded("b", &[(NodeAddressType::InternalIp, "10.0.0.2")]));
    let mut h = Harness::with_cloud(cloud).await;
    h.create_node(&uninitialized_node("a")).await;
    h.create_node(&uninitialized_node("b")).await;
    let mut settings = fast_settings();
    settings.node_status_update_frequency = Duration::from_millis(500);
    h.start(&[ControllerId::CloudNode], &settings).await;
    wait_initialized(&h, "a").await;
    wait_initialized(&h, "b").await;

    // The cloud moves node a to another address and instance type.
    let mut moved = seeded("a", &[(NodeAddressType::InternalIp, "10.0.0.9")]);
    moved.instance_type = "fake.xlarge".into();
    h.cloud.add_instance(moved);
    h.server.reset_stats();
    let node = eventually("a's address refreshed", WAIT, || async {
        let node = h.nodes().get("a").await.ok()?;
        let addresses = node.status.as_ref()?.addresses.clone()?;
        addresses
            .contains(&NodeAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.9".into(),
            })
            .then_some(node)
    })
    .await
    .expect("a bounded wait");
    let labels = eventually("a's labels refreshed", WAIT, || async {
        let labels = h.nodes().get("a").await.ok()?.metadata.labels?;
        (labels
            .get("node.kubernetes.io/instance-type")
            .map(String::as_str)
            == Some("fake.xlarge"))
        .then_some(labels)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        labels
            .get("beta.kubernetes.io/instance-type")
            .map(String::as_str),
        Some("fake.xlarge")
    );
    assert!(
        node.status
            .unwrap()
            .addresses
            .unwrap()
            .iter()
            .any(|a| a.type_ == "Hostname")
    );
    // Several refresh passes ran; only node a was ever written.
    let passes = h.activity().passes;
    eventually("two more refresh passes", WAIT, || async {
        (h.activity().passes >= passes + 2).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    let written: std::collections::BTreeSet<_> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "nodes" && r.verb == "patch")
        .map(|r| r.name)
        .collect();
    assert_eq!(written, ["a".to_owned()].into());
    assert!(
        h.cloud.count(Operation::InstancesMetadata) >= 3,
        "refreshes use batch calls"
    );
    h.stop().await;
    // The refresh's own calls are counted apart from initialization's: one
    // or two calls initialized a and b, every other call was a refresh's.
    let metrics = h.metrics.encode(None);
    let counter = |name: &str| {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
    };
    let refresh_calls = counter("ccm_node_refresh_cloud_calls_total");
    let refreshed = counter("ccm_node_refresh_nodes_total");
    let initialization_calls = h.cloud.count(Operation::InstancesMetadata) - refresh_calls;
    assert!(refresh_calls >= 2, "{metrics}");
    assert!((1..=2).contains(&initialization_calls), "{metrics}");
    assert!(
        (refresh_calls..=2 * refresh_calls).contains(&refreshed),
        "one batch call per pass for up to two nodes: {metrics}"
    );
}
