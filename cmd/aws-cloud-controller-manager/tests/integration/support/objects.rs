//! Kubernetes objects as a kubelet and a user write them, and reads of
//! what the CCM wrote.

use ccm_provider_aws::annotations;
use ccm_provider_aws::test_util::seed::Seeded;
use ccm_test_support::{
    UNINITIALIZED, has_taint, load_balancer_service, ready_condition, uninitialized_node,
};
use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

/// The taint the lifecycle controller puts on nodes whose instance is shut down.
pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// The namespace of the tests' Services.
pub const NAMESPACE: &str = "default";

/// The node of `instance` as a kubelet with `--cloud-provider=external`
/// registers it: named after the instance's private DNS name, no provider
/// ID, the uninitialized taint, a Hostname address, Ready as given, and
/// `pod_cidr` if any (as the node IPAM controller would allocate it).
pub fn kubelet_node(instance: &Seeded, ready: bool, pod_cidr: Option<&str>) -> Node {
    let mut node = uninitialized_node(&instance.private_dns_name);
    let spec = node.spec.get_or_insert_default();
    spec.pod_cidr = pod_cidr.map(str::to_owned);
    spec.pod_cidrs = pod_cidr.map(|c| vec![c.to_owned()]);
    node.status.get_or_insert_default().conditions = Some(vec![ready_condition(ready)]);
    node
}

/// A Service of type LoadBalancer asking for a Network Load Balancer, with
/// TCP ports 80 and 443 and `extra` annotations.
pub fn nlb_service(name: &str, extra: &[(&str, &str)]) -> Service {
    let mut all = vec![(annotations::TYPE, "nlb")];
    all.extend_from_slice(extra);
    let mut service = load_balancer_service(name, &all);
    let spec = service.spec.get_or_insert_default();
    spec.selector = None;
    spec.ports = Some(vec![port("http", 80), port("https", 443)]);
    service
}

fn port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.into()),
        port,
        protocol: Some("TCP".into()),
        ..ServicePort::default()
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
