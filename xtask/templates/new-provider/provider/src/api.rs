//! The cloud calls the provider is written against ([`Api`]), the shapes
//! they answer with, and [`HttpApi`], which makes them against the real
//! cloud.
//!
//! Each method is one request to the cloud (or one paginated listing), so
//! that the conformance suite can count them and cancel between them.
//!
//! Errors: answer [`CloudError::Throttled`] (with the cloud's retry delay)
//! when the cloud rate-limits a request, [`CloudError::Other`] for
//! anything else that failed; never sleep inside a call.

//@if load-balancers
use std::collections::BTreeMap;
//@end
use std::fmt;

use async_trait::async_trait;
use ccm_cloud_provider::CloudError;
//@if routes
use ccm_cloud_provider::ipnet::IpNet;
//@end

//@if instances
/// An instance as the cloud describes it. A terminated instance is not
/// listed at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudInstance {
    /// The cloud's ID: the provider ID is `{{name}}://<id>`.
    pub id: String,
    /// Its name, which is its node's name.
    pub name: String,
    /// Its size or type: `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// Its zone: `topology.kubernetes.io/zone`.
    pub zone: String,
    /// Its private address.
    pub private_ip: String,
    /// Its public address, if it has one.
    pub public_ip: Option<String>,
    /// Whether it is stopped (shut down, still existing).
    pub stopped: bool,
}

//@end
//@if load-balancers
/// One forwarded port of a load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedPort {
    /// The port clients connect to.
    pub port: i32,
    /// The node port traffic goes to.
    pub node_port: i32,
    /// `TCP` or `UDP`.
    pub protocol: String,
}

/// What a load balancer should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerSpec {
    /// Its name, unique in the account.
    pub name: String,
    /// Its tags: [`crate::CLUSTER_TAG`] names the owning cluster.
    pub tags: BTreeMap<String, String>,
    /// The ports it forwards.
    pub ports: Vec<ForwardedPort>,
    /// The IDs of the instances it forwards to.
    pub targets: Vec<String>,
}

/// A load balancer as the cloud describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudLoadBalancer {
    /// The cloud's ID.
    pub id: String,
    /// The address clients connect to.
    pub address: String,
    /// What it is now.
    pub spec: LoadBalancerSpec,
}

//@end
//@if routes
/// A route in the cluster network's route table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudRoute {
    /// The cloud's ID.
    pub id: String,
    /// The pod CIDR it routes.
    pub destination: IpNet,
    /// The ID of the instance it routes to.
    pub target: String,
    /// The cluster that owns it ([`crate::CLUSTER_TAG`]).
    pub cluster: String,
    /// Its target no longer exists.
    pub blackhole: bool,
}

//@end
/// The cloud calls the provider makes.
#[async_trait]
pub trait Api: Send + Sync + fmt::Debug {
//@if instances
    /// The instances with these IDs and these names (one request). Unknown
    /// IDs and names are left out of the answer.
    async fn describe_instances(
        &self,
        ids: &[String],
        names: &[String],
    ) -> Result<Vec<CloudInstance>, CloudError>;

//@end
//@if load-balancers
    /// The load balancer called `name`, if there is one.
    async fn find_load_balancer(&self, name: &str)
    -> Result<Option<CloudLoadBalancer>, CloudError>;

    /// Creates a load balancer.
    async fn create_load_balancer(
        &self,
        spec: &LoadBalancerSpec,
    ) -> Result<CloudLoadBalancer, CloudError>;

    /// Makes load balancer `id` what `spec` says.
    async fn update_load_balancer(
        &self,
        id: &str,
        spec: &LoadBalancerSpec,
    ) -> Result<CloudLoadBalancer, CloudError>;

    /// Deletes load balancer `id`; `Ok` when it is already gone.
    async fn delete_load_balancer(&self, id: &str) -> Result<(), CloudError>;

//@end
//@if routes
    /// Every route of the network's route table, every cluster's.
    async fn list_routes(&self) -> Result<Vec<CloudRoute>, CloudError>;

    /// Adds a route to `destination` through instance `target`, owned by
    /// `cluster`.
    async fn create_route(
        &self,
        cluster: &str,
        destination: IpNet,
        target: &str,
    ) -> Result<(), CloudError>;

    /// Deletes route `id`; `Ok` when it is already gone.
    async fn delete_route(&self, id: &str) -> Result<(), CloudError>;

//@end
}

/// [`Api`] over {{Camel}}'s HTTP API, through the workspace's one REST
/// client ([`ccm_rest::Rest`]: the token as a bearer header, hidden from
/// every debug output; each request described to the framework's fence, so
/// a dry run sends the reads and plans the rest; a body fenced until it is
/// written).
///
/// Every method answers [`CloudError::NotImplemented`] until it is written:
/// each says which request it should make. Send it with
/// `self.rest.send(Method::GET, url, None::<&()>)` (`ccm_rest::Method`,
/// `ccm_rest::Url` joined onto the endpoint), read a success with
/// [`ccm_rest::decode_answer`], answer a 404 or another failing status with
/// [`ccm_rest::Unexpected`], and map a 429 or the cloud's throttling error
/// to [`CloudError::Throttled`] with the delay [`ccm_rest::retry_after`]
/// reads.
pub struct HttpApi {
    rest: ccm_rest::Rest,
    endpoint: String,
}

impl HttpApi {
    /// A client for the API at `endpoint`, authenticated with `token`.
    ///
    /// # Errors
    /// When the token cannot travel in a header, or TLS cannot be set up.
    pub fn new(endpoint: &str, token: String) -> Result<Self, ccm_rest::BuildError> {
        Ok(Self {
            rest: ccm_rest::Rest::new("{{Camel}}", ccm_rest::Auth::Bearer(token))?,
            endpoint: endpoint.trim_end_matches('/').to_owned(),
        })
    }

    /// What every unwritten call answers.
    fn not_yet(&self) -> CloudError {
        // The client is for the requests to come.
        let _ = &self.rest;
        CloudError::NotImplemented
    }
}

impl fmt::Debug for HttpApi {
    // The token is a secret: never in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpApi")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Api for HttpApi {
//@if instances
    async fn describe_instances(
        &self,
        ids: &[String],
        names: &[String],
    ) -> Result<Vec<CloudInstance>, CloudError> {
        // NOT IMPLEMENTED ({{name}}): list the instances by ID and by name in
        // one request (paginated), terminated ones left out.
        let _ = (ids, names);
        Err(self.not_yet())
    }

//@end
//@if load-balancers
    async fn find_load_balancer(
        &self,
        name: &str,
    ) -> Result<Option<CloudLoadBalancer>, CloudError> {
        // NOT IMPLEMENTED ({{name}}): look the load balancer up by name.
        let _ = name;
        Err(self.not_yet())
    }

    async fn create_load_balancer(
        &self,
        spec: &LoadBalancerSpec,
    ) -> Result<CloudLoadBalancer, CloudError> {
        // NOT IMPLEMENTED ({{name}}): create it with its tags, ports and targets.
        let _ = spec;
        Err(self.not_yet())
    }

    async fn update_load_balancer(
        &self,
        id: &str,
        spec: &LoadBalancerSpec,
    ) -> Result<CloudLoadBalancer, CloudError> {
        // NOT IMPLEMENTED ({{name}}): set its ports and targets.
        let _ = (id, spec);
        Err(self.not_yet())
    }

    async fn delete_load_balancer(&self, id: &str) -> Result<(), CloudError> {
        // NOT IMPLEMENTED ({{name}}): delete it; a 404 is success.
        let _ = id;
        Err(self.not_yet())
    }

//@end
//@if routes
    async fn list_routes(&self) -> Result<Vec<CloudRoute>, CloudError> {
        // NOT IMPLEMENTED ({{name}}): list the network's routes with their tags.
        Err(self.not_yet())
    }

    async fn create_route(
        &self,
        cluster: &str,
        destination: IpNet,
        target: &str,
    ) -> Result<(), CloudError> {
        // NOT IMPLEMENTED ({{name}}): add the route, tagged with the cluster.
        let _ = (cluster, destination, target);
        Err(self.not_yet())
    }

    async fn delete_route(&self, id: &str) -> Result<(), CloudError> {
        // NOT IMPLEMENTED ({{name}}): delete the route; a 404 is success.
        let _ = id;
        Err(self.not_yet())
    }

//@end
}
