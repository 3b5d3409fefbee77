//! Kubernetes objects as a kubelet and a user write them, and reads of
//! what the CCM wrote.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Service, ServicePort, ServiceSpec,
    Taint,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use provider_aws::annotations;
use provider_aws::test_util::seed::Seeded;

/// The taint a kubelet with `--cloud-provider=external` registers with.
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The taint the lifecycle controller puts on nodes whose instance is shut down.
pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// The namespace of the tests' Services.
pub const NAMESPACE: &str = "default";

fn ready_condition(ready: bool) -> NodeCondition {
    NodeCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        reason: Some(
            if ready {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            }
            .into(),
        ),
        ..NodeCondition::default()
    }
}

/// The node of `instance` as a kubelet with `--cloud-provider=external`
/// registers it: named after the instance's private DNS name, no provider
/// ID, the uninitialized taint, a Hostname address, Ready as given, and
/// `pod_cidr` if any (as the node IPAM controller would allocate it).
pub fn kubelet_node(instance: &Seeded, ready: bool, pod_cidr: Option<&str>) -> Node {
    let name = instance.private_dns_name.clone();
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_owned(),
                name.clone(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: UNINITIALIZED.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }]),
            pod_cidr: pod_cidr.map(str::to_owned),
            pod_cidrs: pod_cidr.map(|c| vec![c.to_owned()]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: name,
            }]),
            conditions: Some(vec![ready_condition(ready)]),
            ..NodeStatus::default()
        }),
    }
}

/// A Service of type LoadBalancer asking for a Network Load Balancer, with
/// TCP ports 80 and 443 and `extra` annotations.
pub fn nlb_service(name: &str, extra: &[(&str, &str)]) -> Service {
    let mut all = BTreeMap::from([(annotations::TYPE.to_owned(), "nlb".to_owned())]);
    all.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let port = |name: &str, port: i32| ServicePort {
        name: Some(name.into()),
        port,
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    };
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            annotations: Some(all),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![port("http", 80), port("https", 443)]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

pub fn nodes(client: &kube::Client) -> Api<Node> {
    Api::all(client.clone())
}

pub fn services(client: &kube::Client) -> Api<Service> {
    Api::namespaced(client.clone(), NAMESPACE)
}

pub async fn create_node(client: &kube::Client, node: &Node) -> anyhow::Result<Node> {
    Ok(nodes(client).create(&PostParams::default(), node).await?)
}

pub async fn create_service(client: &kube::Client, service: &Service) -> anyhow::Result<Service> {
    Ok(services(client)
        .create(&PostParams::default(), service)
        .await?)
}

/// Sets the node's Ready condition, as the kubelet's heartbeat (or its
/// absence, through the node lifecycle controller) does.
pub async fn set_ready(client: &kube::Client, name: &str, ready: bool) -> anyhow::Result<()> {
    let patch = serde_json::json!({ "status": { "conditions": [ready_condition(ready)] } });
    nodes(client)
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    Ok(())
}

pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|t| t.key == key))
}

pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

/// A node once the CCM initialized it: provider ID set, taint gone.
pub fn is_initialized(node: &Node) -> bool {
    provider_id(node).is_some_and(|id| !id.is_empty()) && !has_taint(node, UNINITIALIZED)
}

/// `(type, address)` of the node's addresses, in order.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .map(|a| {
            a.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The status of the node's condition `type_`, if it has one.
pub fn condition(node: &Node, type_: &str) -> Option<String> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.clone())
}

/// The Service's `status.loadBalancer.ingress[*].hostname`.
pub fn ingress_hostnames(service: &Service) -> Vec<String> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|i| i.hostname.clone()).collect())
        .unwrap_or_default()
}

/// The node port of the Service's port `port`.
pub fn node_port(service: &Service, port: i32) -> Option<i32> {
    service
        .spec
        .as_ref()?
        .ports
        .as_ref()?
        .iter()
        .find(|p| p.port == port)?
        .node_port
}

/// Events of `type_` (Normal, Warning) about the object named `name`.
pub async fn events(client: &kube::Client, name: &str, type_: &str) -> anyhow::Result<Vec<Event>> {
    let events: Api<Event> = Api::all(client.clone());
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some(type_))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}
