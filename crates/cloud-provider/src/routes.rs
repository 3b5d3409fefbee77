//! Pod-network routes (upstream's `cloudprovider.Routes`), listed, created
//! and deleted by the route controller.

use async_trait::async_trait;
use ipnet::IpNet;

use crate::{BatchResult, CloudError};

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

/// A route the route controller wants created, with a unique name the
/// provider may use for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteCreate {
    /// A unique name the provider may use for the route.
    pub name_hint: String,
    /// The route, with its target node's provider ID when the node has one.
    pub route: Route,
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

    /// Creates each of `routes`, as [`Routes::create_route`] would: one
    /// result per route, in input order. A provider that can share the work
    /// of many creates (one read of the route tables, one batched lookup
    /// of the target instances) overrides it and says so in
    /// [`Routes::batches_route_creates`]; the default creates them one after
    /// another.
    ///
    /// # Errors
    /// The outer error when no route could be attempted (the route tables
    /// could not be read); otherwise each route's own error.
    async fn create_routes(&self, cluster_name: &str, routes: &[RouteCreate]) -> BatchResult<()> {
        let mut results = Vec::with_capacity(routes.len());
        for create in routes {
            results.push(
                self.create_route(cluster_name, &create.name_hint, &create.route)
                    .await,
            );
        }
        Ok(results)
    }

    /// Whether [`Routes::create_routes`] is the provider's own, cheaper
    /// than its routes one at a time. When it is not, the framework calls
    /// [`Routes::create_route`] for each route, so that each is counted,
    /// limited and fenced as a call of its own.
    fn batches_route_creates(&self) -> bool {
        false
    }

    /// Deletes `route`, as returned by [`Routes::list_routes`].
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError>;
}
