//! Pod-network routes (upstream's `cloudprovider.Routes`), listed, created
//! and deleted by the route controller.

use async_trait::async_trait;
use ipnet::IpNet;

use crate::CloudError;

/// One pod-CIDR route in the cloud's route table (upstream's
/// `cloudprovider.Route`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// The cloud's name for the route; for a route to be created, a hint the
    /// provider may use or ignore.
    pub name: String,
    /// The name of the node traffic for `destination_cidr` goes to. Empty
    /// for a blackhole route whose target no longer exists.
    pub target_node: String,
    /// The target node's `spec.providerID`, when known. The route controller
    /// sets it on routes it creates, so a provider need not look the node's
    /// instance up by name; a provider fills it in on listed routes when it
    /// knows it cheaply.
    pub target_provider_id: Option<String>,
    /// The pod CIDR this route sends to `target_node`.
    pub destination_cidr: IpNet,
    /// The route's target is gone: traffic to it is dropped. The route
    /// controller deletes blackhole routes inside the cluster CIDR.
    pub blackhole: bool,
}

/// Pod-network routes (upstream's `cloudprovider.Routes`).
///
/// # Contract for implementers
/// - Only routes owned by `cluster_name` are listed, created or deleted.
/// - `create_route` succeeds when an identical route already exists;
///   `delete_route` succeeds when the route is already gone.
/// - Inputs are read-only.
#[async_trait]
pub trait Routes: Send + Sync {
    /// All routes this cluster owns, blackhole routes included.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError>;

    /// Creates `route` to its target node. `name_hint` is a unique name the
    /// provider may use for the route.
    ///
    /// # Errors
    /// [`CloudError::InstanceNotFound`] when the target node has no instance.
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError>;

    /// Deletes `route`, as returned by [`Routes::list_routes`].
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError>;
}
