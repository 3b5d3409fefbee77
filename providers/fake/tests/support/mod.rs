//! Shared builders for the fake cloud's tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::collections::BTreeMap;
use std::sync::Arc;

use cloud_provider::k8s_openapi::api::core::v1::{
    Node, NodeSpec, Service, ServicePort, ServiceSpec,
};
use cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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

pub(crate) fn service(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Service {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some(uid.to_owned()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
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
