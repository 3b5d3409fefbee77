//! Shared builders for the fake cloud's tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub(crate) fn node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
}

pub(crate) fn node_with_provider_id(name: &str, provider_id: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.to_owned()),
            ..NodeSpec::default()
        }),
        status: None,
    })
}

/// A LoadBalancer Service `default/<name>` with one TCP port 80 → node port
/// 30080, and `annotations`.
pub(crate) fn service(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Service {
    let mut service = ccm_test_support::load_balancer_service(name, annotations);
    service.metadata.uid = Some(uid.to_owned());
    service.spec.get_or_insert_default().ports = Some(vec![ServicePort {
        port: 80,
        node_port: Some(30080),
        protocol: Some("TCP".to_owned()),
        ..ServicePort::default()
    }]);
    service
}
