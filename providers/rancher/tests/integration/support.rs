//! What several of these tests build: a provider on the emulator, nodes,
//! and a LoadBalancer Service.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service, ServicePort, ServiceSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, CloudProvider, Environment, ProviderFactory};
use ccm_provider_rancher::emulator::{ACCESS_KEY, CattleEmulator, SECRET_KEY};
use ccm_provider_rancher::{
    ACCESS_KEY_VARIABLE, RancherProviderFactory, SECRET_KEY_VARIABLE, URL_VARIABLE,
};

/// The provider, configured for `cattle`.
pub(crate) fn provider(cattle: &CattleEmulator) -> Arc<dyn CloudProvider> {
    let env = Environment::default()
        .with(URL_VARIABLE, cattle.url())
        .with(ACCESS_KEY_VARIABLE, ACCESS_KEY)
        .with(SECRET_KEY_VARIABLE, SECRET_KEY);
    RancherProviderFactory::build(None, &env).expect("the provider builds")
}

/// A node called `name`, with nothing else set.
pub(crate) fn node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
}

/// `default/web`, a LoadBalancer Service forwarding each (port, node port)
/// of `ports` over TCP.
pub(crate) fn service(ports: &[(i32, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("0e6d5d0e-1111-4c4c-9d9d-000000000001".into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(port, node_port)| ServicePort {
                        port: *port,
                        node_port: Some(*node_port),
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Calls `call` until it answers something but `Retry`, as the service
/// controller requeues (without its delay), at most 50 times.
pub(crate) async fn settled<T, F, Fut>(mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CloudError>>,
{
    for _ in 0..50 {
        match call().await {
            Ok(value) => return value,
            Err(CloudError::Retry { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    panic!("still Retry after 50 calls");
}
