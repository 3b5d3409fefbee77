//! The Kubernetes objects these tests hand the provider. The fake API and
//! Prism are the crate's `test_util`, shared with the binary's end-to-end
//! tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::collections::BTreeMap;
use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeSpec, NodeStatus, Service, ServicePort,
};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// An initialized node with a public IPv4 address, as the CCM leaves it.
pub(crate) fn node(name: &str, provider_id: Option<&str>) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "ExternalIP".to_owned(),
                address: "203.0.113.10".to_owned(),
            }]),
            ..NodeStatus::default()
        }),
    })
}

/// A LoadBalancer Service `default/<name>` with one TCP port 80 → node port
/// 30080, and `annotations`.
pub(crate) fn service(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Service {
    let mut service = ccm_test_support::load_balancer_service(name, annotations);
    service.metadata.uid = Some(uid.to_owned());
    service.spec.get_or_insert_default().ports = Some(vec![port("TCP", 80, 30080)]);
    service
}

pub(crate) fn port(protocol: &str, port: i32, node_port: i32) -> ServicePort {
    ServicePort {
        protocol: Some(protocol.to_owned()),
        port,
        node_port: Some(node_port),
        ..ServicePort::default()
    }
}

/// `service` with `annotations` added.
pub(crate) fn annotated(mut service: Service, annotations: &[(&str, &str)]) -> Service {
    let map = service
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    for (k, v) in annotations {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    service
}
