//! The provider conformance suite against the fake DigitalOcean API behind
//! Prism: two providers for two clusters (told apart by `DO_CLUSTER_ID`)
//! in one account, with upstream's default network load balancers and with
//! HTTP-aware ones.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use ccm_cloud_provider::Environment;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeSpec, NodeStatus, Service, ServicePort,
};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_provider_conformance::{Emulator, Resources, Subject};
use ccm_provider_digitalocean::test_util::{Account, FakeDroplet, account};
use ccm_provider_digitalocean::{
    ENV_CLUSTER_ID, ENV_DEFAULT_LB_TYPE, PROVIDER_ID_PREFIX, annotations,
    droplet_id_from_provider_id,
};

/// The cluster name and `DO_CLUSTER_ID` of the provider under test.
const CLUSTER: (&str, &str) = ("conformance", "5a1c0f3e-7b2d-4c8e-9f10-2b3c4d5e6f70");
/// The same, for the other cluster in the account.
const NEIGHBOUR: (&str, &str) = ("neighbour", "9e8d7c6b-5a49-4382-a716-0f1e2d3c4b5a");
/// Droplet IDs the emulator hands out, from here up.
const FIRST_DROPLET: u64 = 7000;
/// A droplet ID the emulator never hands out.
const NO_DROPLET: u64 = 6999;

/// The fake DigitalOcean account, as the suite drives it.
#[derive(Debug)]
struct FakeDigitalOcean {
    account: Account,
    next_droplet: AtomicU64,
}

/// The droplet ID in `node`'s provider ID.
fn droplet_id(node: &Node) -> u64 {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(droplet_id_from_provider_id)
        .expect("the emulator's nodes carry a droplet's provider ID")
}

/// A Node as a DigitalOcean kubelet registers it: the droplet's provider
/// ID and addresses.
fn node(name: &str, droplet: &FakeDroplet) -> Node {
    let addresses = [
        ("InternalIP", &droplet.private_ipv4),
        ("ExternalIP", &droplet.public_ipv4),
    ]
    .into_iter()
    .filter_map(|(kind, ip)| {
        ip.as_ref().map(|ip| NodeAddress {
            type_: kind.to_owned(),
            address: ip.clone(),
        })
    })
    .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("{PROVIDER_ID_PREFIX}{}", droplet.id)),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(addresses),
            ..NodeStatus::default()
        }),
    }
}

/// A LoadBalancer Service `default/<name>` with one TCP port 80 → node
/// port 30080, and `annotations`.
fn service(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Service {
    let mut service = ccm_test_support::load_balancer_service(name, annotations);
    service.metadata.uid = Some(uid.to_owned());
    service.spec.get_or_insert_default().ports = Some(vec![ServicePort {
        protocol: Some("TCP".to_owned()),
        port: 80,
        node_port: Some(30080),
        ..ServicePort::default()
    }]);
    service
}

#[async_trait]
impl Emulator for FakeDigitalOcean {
    async fn add_instance(&self, name: &str) -> Node {
        let id = self.next_droplet.fetch_add(1, Ordering::SeqCst);
        let droplet = FakeDroplet::new(id, name);
        let node = node(name, &droplet);
        self.account.add_droplet(droplet);
        node
    }

    fn missing_node(&self, name: &str) -> Node {
        node(name, &FakeDroplet::new(NO_DROPLET, name))
    }

    async fn stop_instance(&self, node: &Node) {
        self.account.set_droplet_status(droplet_id(node), "off");
    }

    async fn remove_instance(&self, node: &Node) {
        self.account.remove_droplet(droplet_id(node));
    }

    fn service(&self, name: &str, uid: &str) -> Service {
        service(name, uid, &[])
    }

    /// Disowned: upstream's way of leaving a Service's load balancer to
    /// someone else.
    fn foreign_service(&self, name: &str, uid: &str) -> Option<Service> {
        Some(service(name, uid, &[(annotations::DISOWN, "true")]))
    }

    /// Everything the provider creates: load balancers, the public-access
    /// firewall, and tags.
    async fn resources(&self) -> Resources {
        let harness = self.account.harness;
        let accounts = harness.api.lock();
        let a = &accounts[&self.account.token];
        BTreeMap::from([
            ("load-balancers".to_owned(), a.load_balancers.len()),
            ("firewalls".to_owned(), a.firewalls.len()),
            ("tags".to_owned(), a.tags.len()),
        ])
    }

    fn requests(&self) -> u64 {
        self.account.request_count() as u64
    }

    async fn set_throttled(&self, on: bool) {
        self.account.set_throttled(on);
    }
}

/// The suite's subject on a fresh account: two providers for `env`, one
/// per cluster.
async fn subject(account: Account, env: Environment) -> Subject {
    let provider = account
        .provider_with(&env.clone().with(ENV_CLUSTER_ID, CLUSTER.1))
        .await;
    let neighbour = account
        .provider_with(&env.with(ENV_CLUSTER_ID, NEIGHBOUR.1))
        .await;
    Subject {
        provider: Arc::new(provider),
        cluster: CLUSTER.0.to_owned(),
        neighbour: Arc::new(neighbour),
        neighbour_cluster: NEIGHBOUR.0.to_owned(),
        emulator: Arc::new(FakeDigitalOcean {
            account,
            next_droplet: AtomicU64::new(FIRST_DROPLET),
        }),
    }
}

#[tokio::test]
async fn the_provider_conforms_with_upstreams_defaults() {
    let account = account();
    let env = account.upstream_env();
    ccm_provider_conformance::assert_conforms(&subject(account, env).await).await;
}

#[tokio::test]
async fn the_provider_conforms_with_http_aware_load_balancers() {
    let account = account();
    let env = account.upstream_env().with(ENV_DEFAULT_LB_TYPE, "REGIONAL");
    ccm_provider_conformance::assert_conforms(&subject(account, env).await).await;
}
