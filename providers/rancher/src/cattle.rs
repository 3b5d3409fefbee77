//! Rancher 1.x's Cattle `v2-beta` API on the wire: the resources the
//! provider reads and writes, with the field names of the `go-rancher/v2`
//! generated types (`generated_host.go`, `generated_load_balancer_service.go`,
//! ...) that upstream's CCM is built on. Only the fields used here are
//! declared; everything else the API sends is ignored on reading.
//!
//! The emulator (feature `test-util`) serves the same types, with the
//! envelope fields (`type`, `links`, `actions`, `state`) a real server adds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The fields every Cattle resource has (go-rancher's `Resource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resource {
    /// Its ID, such as `1s5`.
    pub id: String,
    /// Its schema type, such as `loadBalancerService`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Named URLs: `self`, and related collections such as `ipAddresses`.
    pub links: BTreeMap<String, String>,
    /// The actions allowed in its current state, each with its URL.
    pub actions: BTreeMap<String, String>,
}

/// A list answer (go-rancher's `Collection` with its `data`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection<T> {
    /// Always `collection`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The schema type of the items.
    #[serde(default, rename = "resourceType")]
    pub resource_type: String,
    /// The items of this page.
    #[serde(default = "Vec::new")]
    pub data: Vec<T>,
    /// Where the next page is, when there is one.
    #[serde(default)]
    pub pagination: Option<Pagination>,
}

/// A collection's paging (go-rancher's `Pagination`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pagination {
    /// The URL of the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The page size asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// Whether more items exist than this page holds.
    pub partial: bool,
}

/// The lifecycle fields of Cattle's stateful resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Lifecycle {
    /// `registering`, `inactive`, `activating`, `active`, `removing`,
    /// `removed`, ...
    pub state: String,
    /// `yes` while a transition runs, `error` when it failed, else `no`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transitioning: Option<String>,
    /// What the transition is doing or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transitioning_message: Option<String>,
    /// When it was removed; absent while it exists (`removed_null=1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

impl Lifecycle {
    /// Whether the resource still exists: not being removed, not removed.
    pub fn in_play(&self) -> bool {
        self.removed.is_none()
            && !matches!(
                self.state.as_str(),
                "removing" | "removed" | "purging" | "purged"
            )
    }
}

/// A host: a machine running a Rancher agent (go-rancher's `Host`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Host {
    /// ID, type, links (`ipAddresses`) and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// Its state.
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
    /// Its hostname, as its kubelet names the node (perhaps an FQDN).
    pub hostname: String,
    /// Its UUID: the instance ID in the node's provider ID.
    pub uuid: String,
    /// The agent's connection: `active`, `reconnecting`, `disconnected`...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_state: Option<String>,
    /// Its addresses, when asked for with `include=ipAddresses`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<Vec<IpAddress>>,
}

/// One address of a host (go-rancher's `IpAddress`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IpAddress {
    /// ID, type, links and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// The address.
    pub address: String,
}

/// A stack, the group the load balancers live in (go-rancher's `Stack`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Stack {
    /// ID, type, links and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// Its state.
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
    /// Its name.
    pub name: String,
    /// Who made it: `kubernetes-loadbalancers://` for the CCM's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
}

/// A load balancer (go-rancher's `LoadBalancerService`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LoadBalancerService {
    /// ID, type, links (`self`, `consumedservices`) and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// Its state.
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
    /// `lb-<Service's load balancer name>`.
    pub name: String,
    /// The stack it is in.
    pub stack_id: String,
    /// Its container's configuration: the ports it listens on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_config: Option<LaunchConfig>,
    /// Where each port sends traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lb_config: Option<LbConfig>,
    /// Key-value metadata: this provider records the owning cluster and
    /// Service here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, serde_json::Value>>,
    /// Where clients reach it, once its containers run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_endpoints: Option<Vec<PublicEndpoint>>,
}

/// A load balancer's container configuration (go-rancher's `LaunchConfig`,
/// the fields the CCM sets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LaunchConfig {
    /// `<port>:<port>/tcp`, one per Service port.
    pub ports: Vec<String>,
    /// `docker:<image>`: the `lb.instance.image` setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_uuid: Option<String>,
}

/// A load balancer's routing (go-rancher's `LbConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LbConfig {
    /// One rule per Service port and node.
    pub port_rules: Vec<PortRule>,
}

/// One routing rule (go-rancher's `PortRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PortRule {
    /// The port clients connect to.
    pub source_port: i64,
    /// The node port traffic goes to.
    pub target_port: i64,
    /// The external service (one node) traffic goes to.
    pub service_id: String,
    /// `tcp`.
    pub protocol: String,
}

/// Where a load balancer is reachable (go-rancher's `PublicEndpoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PublicEndpoint {
    /// The address: the Service's ingress IP.
    pub ip_address: String,
    /// The port.
    pub port: i64,
    /// The host its container runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
}

/// An external service: one node's address, as a load balancer's target
/// (go-rancher's `ExternalService`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ExternalService {
    /// ID, type, links (`self`, `consumedbyservices`) and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// Its state.
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
    /// The node's hostname, cleaned to a Rancher name.
    pub name: String,
    /// The stack it is in.
    pub stack_id: String,
    /// The node's address.
    pub external_ip_addresses: Vec<String>,
}

/// Any service, as a link such as `consumedservices` lists it (go-rancher's
/// `Service`, the fields used here).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Service {
    /// ID, type, links and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// Its state.
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
    /// Its name.
    pub name: String,
}

/// A load balancer's links to the services it sends to
/// (go-rancher's `SetServiceLinksInput`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SetServiceLinksInput {
    /// The links.
    pub service_links: Vec<ServiceLink>,
}

/// One link (go-rancher's `ServiceLink`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServiceLink {
    /// The linked service.
    pub service_id: String,
}

/// A server setting (go-rancher's `Setting`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Setting {
    /// ID, type, links and actions.
    #[serde(flatten)]
    pub resource: Resource,
    /// Its name, such as `lb.instance.image`.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// An error answer: `{"type":"error","status":404,"code":"NotFound",...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiError {
    /// Always `error`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The HTTP status.
    pub status: u16,
    /// A code such as `NotFound`, `Unauthorized`, `InvalidState`.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// The stack upstream keeps every load balancer in.
pub const STACK_NAME: &str = "kubernetes-loadbalancers";
/// That stack's external ID, which marks it as the CCM's.
pub const STACK_EXTERNAL_ID: &str = "kubernetes-loadbalancers://";
/// The setting naming the load balancers' image.
pub const LB_IMAGE_SETTING: &str = "lb.instance.image";
