//! The provider conformance suite against the in-memory {{Camel}} cloud.
//!
//! When `HttpApi` talks to the real cloud, run the same suite against a
//! faithful emulator of its API (a recorded or spec-driven fake, as the
//! DigitalOcean provider does with Prism) by giving it another `Subject`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_provider_conformance::{Emulator, Resources, Subject};
use ccm_provider_{{snake}}::emulator::InMemoryCloud;
use ccm_provider_{{snake}}::{PROVIDER_ID_PREFIX, Settings, {{Camel}}Provider};

#[derive(Debug)]
struct Cloud(Arc<InMemoryCloud>);

fn node(name: &str, id: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("{PROVIDER_ID_PREFIX}{id}")),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

#[allow(dead_code, reason = "unused when the provider has no instances")]
fn instance_id(node: &Node) -> String {
    let id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
    id.and_then(|id| id.strip_prefix(PROVIDER_ID_PREFIX))
        .unwrap_or_default()
        .to_owned()
}

#[async_trait]
impl Emulator for Cloud {
    async fn add_instance(&self, name: &str) -> Node {
//@if instances
        node(name, &self.0.add_instance(name))
//@end
//@if !instances
        node(name, name)
//@end
    }

    fn missing_node(&self, name: &str) -> Node {
        node(name, "i-missing")
    }

    async fn stop_instance(&self, node: &Node) {
//@if instances
        self.0.stop_instance(&instance_id(node));
//@end
//@if !instances
        let _ = node;
//@end
    }

    async fn remove_instance(&self, node: &Node) {
//@if instances
        self.0.remove_instance(&instance_id(node));
//@end
//@if !instances
        let _ = node;
//@end
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
        self.0.counts()
    }

    fn requests(&self) -> u64 {
        self.0.requests()
    }

    async fn set_throttled(&self, on: bool) {
        self.0.set_throttled(on);
    }
}

#[tokio::test]
async fn the_provider_conforms() {
    let cloud = Arc::new(InMemoryCloud::new());
    let settings = Settings {
        endpoint: "http://127.0.0.1:1".into(),
        region: "region-1".into(),
    };
    let provider = Arc::new({{Camel}}Provider::new(cloud.clone(), settings));
    let subject = Subject {
        provider: provider.clone(),
        cluster: "conformance".into(),
        neighbour: provider,
        neighbour_cluster: "neighbour".into(),
        emulator: Arc::new(Cloud(cloud)),
    };
    ccm_provider_conformance::assert_conforms(&subject).await;
}
