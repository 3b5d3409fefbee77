//! What a provider made for a cluster, listed so that an audit can find
//! what nobody owns any more (`<binary> audit`): load balancers, target
//! groups, security groups, firewall rules and routes whose Service or Node
//! is gone.

use async_trait::async_trait;

use crate::CloudError;

/// Whom a cloud resource was made for, as the provider can tell from the
/// resource alone (its tags, its name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// The load balancer of the Service whose
    /// [`LoadBalancer::load_balancer_name`](crate::LoadBalancer::load_balancer_name)
    /// is this name (AWS, DigitalOcean, the fake cloud name theirs from the
    /// Service's UID).
    LoadBalancerName(String),
    /// The Service with this namespace and name (a `kubernetes.io/service-name`
    /// tag).
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
    /// The node with this name (a pod-CIDR route's target).
    Node(String),
    /// The cluster as a whole, whatever its Services and Nodes: never
    /// listed as leaked while the cluster exists (a shared security group,
    /// the cluster's firewall).
    Cluster,
}

/// One cloud resource that carries this cluster's ownership marks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnedResource {
    /// What it is, in the provider's words: [`OwnedResource::LOAD_BALANCER`],
    /// `target-group`, `security-group`, `firewall-rule`, `route`.
    pub kind: String,
    /// The cloud's identifier, which [`Inventory::delete_owned`] takes back.
    pub id: String,
    /// Its name, for people.
    pub name: String,
    /// Whom it was made for.
    pub owner: Owner,
    /// For a route: the pod CIDR it sends to its node, so that a route to a
    /// node that exists but has another CIDR counts as leaked.
    pub cidr: Option<String>,
    /// For a route: its target's provider ID, when the provider knows it.
    /// As for the route controller, the route is the node's whose name the
    /// owner gives *or* whose `spec.providerID` this is (a cloud that maps
    /// instances to node names by a convention, such as AWS's private DNS
    /// names, must not make a live route look leaked where node names
    /// follow another).
    pub provider_id: Option<String>,
}

impl OwnedResource {
    /// The kind of a Service's load balancer itself (what a Service's
    /// recorded ingress points at).
    pub const LOAD_BALANCER: &'static str = "load-balancer";
}

/// What this provider created for a cluster, for `<binary> audit`.
///
/// # Contract for implementers
/// - List only resources carrying `cluster_name`'s ownership marks, never
///   another cluster's or untagged ones; the framework decides what is
///   leaked by matching owners against the cluster's Services and Nodes.
/// - List in the order resources can be deleted (a load balancer before
///   its target groups and security groups).
/// - `delete_owned` succeeds when the resource is already gone, and deletes
///   nothing but that one resource.
#[async_trait]
pub trait Inventory: Send + Sync {
    /// Every resource made for `cluster_name`.
    async fn owned_resources(&self, cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError>;

    /// Deletes one resource [`Inventory::owned_resources`] listed.
    async fn delete_owned(
        &self,
        cluster_name: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError>;
}
