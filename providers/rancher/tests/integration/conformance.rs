//! The provider conformance suite against the Cattle API emulator, over
//! HTTP: the provider's real client, the emulator's asynchronous states.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use ccm_cloud_provider::Environment;
use ccm_cloud_provider::ProviderFactory;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    Node, NodeSpec, Service, ServicePort, ServiceSpec,
};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_provider_conformance::{Emulator, Resources, Subject};
use ccm_provider_rancher::emulator::{ACCESS_KEY, CattleEmulator, SECRET_KEY};
use ccm_provider_rancher::{
    ACCESS_KEY_VARIABLE, PROVIDER_ID_PREFIX, RancherProviderFactory, SECRET_KEY_VARIABLE,
    URL_VARIABLE,
};

#[derive(Debug)]
struct Cloud {
    cattle: CattleEmulator,
    next_ip: AtomicU32,
}

fn node(name: &str, uuid: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("{PROVIDER_ID_PREFIX}{uuid}")),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

fn uuid(node: &Node) -> String {
    let id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
    id.and_then(|id| id.strip_prefix(PROVIDER_ID_PREFIX))
        .unwrap_or_default()
        .to_owned()
}

#[async_trait]
impl Emulator for Cloud {
    async fn add_instance(&self, name: &str) -> Node {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        let ip = format!("10.42.{}.{}", n / 250, n % 250 + 1);
        let host = self.cattle.add_host(name, &ip);
        node(name, &host.uuid)
    }

    fn missing_node(&self, name: &str) -> Node {
        node(name, "00000000-0000-0000-0000-000000000000")
    }

    async fn stop_instance(&self, node: &Node) {
        self.cattle.stop_host(&uuid(node));
    }

    async fn remove_instance(&self, node: &Node) {
        self.cattle.remove_host(&uuid(node));
    }

    fn service(&self, name: &str, uid: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("default".to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".to_owned()),
                selector: Some(BTreeMap::from([("app".to_owned(), name.to_owned())])),
                ports: Some(vec![ServicePort {
                    port: 80,
                    node_port: Some(30080),
                    protocol: Some("TCP".to_owned()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    async fn resources(&self) -> Resources {
        self.cattle.snapshot().counts()
    }

    fn requests(&self) -> u64 {
        self.cattle.requests()
    }

    async fn set_throttled(&self, on: bool) {
        let _ = on;
    }

    fn node_kinds(&self) -> &'static [&'static str] {
        &["external-services"]
    }

    fn throttle_gap(&self) -> Option<&'static str> {
        Some("Rancher 1.x's API has no rate limit")
    }
}

fn provider(cattle: &CattleEmulator) -> Arc<dyn ccm_cloud_provider::CloudProvider> {
    let env = Environment::default()
        .with(URL_VARIABLE, cattle.url())
        .with(ACCESS_KEY_VARIABLE, ACCESS_KEY)
        .with(SECRET_KEY_VARIABLE, SECRET_KEY);
    RancherProviderFactory::build(None, &env).expect("the emulator's settings build")
}

#[tokio::test]
async fn the_provider_conforms() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    let provider = provider(&cattle);
    let subject = Subject {
        provider: provider.clone(),
        cluster: "conformance".into(),
        neighbour: provider,
        neighbour_cluster: "neighbour".into(),
        emulator: Arc::new(Cloud {
            cattle,
            next_ip: AtomicU32::new(0),
        }),
    };
    ccm_provider_conformance::assert_conforms(&subject).await;
}
