//! DigitalOcean: droplets and load balancers over the REST API.
//!
//! Start with [`DigitalOceanProviderFactory`]: the `digitalocean` binary
//! hands it to the app, which builds a [`DigitalOceanProvider`] from
//! upstream's environment variables ([`Settings`]) and initializes it.
//!
//! - **Instances**: a node is the droplet named by its provider ID
//!   `digitalocean://<droplet-id>`, or, before it has one, the droplet whose
//!   name (or an address) is the node name. Batch lookups answer many nodes
//!   from one paginated droplet list.
//! - **Load balancers**: one DigitalOcean load balancer per Service,
//!   configured by upstream's `service.beta.kubernetes.io/do-loadbalancer-*`
//!   annotations and remembered in `kubernetes.digitalocean.com/load-balancer-id`.
//!   Its droplets' health is its `status` alone: the API reports no
//!   per-droplet health.
//! - **Service observer**: upstream's public-access firewall, open to the
//!   ports the Services need (`PUBLIC_ACCESS_FIREWALL_NAME`/`_TAGS`), and
//!   its periodic re-tagging of load balancers with the cluster tag.
//! - **Volumes**: a PersistentVolume of the block storage CSI driver
//!   (`dobs.csi.digitalocean.com`) gets its volume's region as
//!   `topology.kubernetes.io/region`; one volume lookup per volume.
//! - **Routes**: none. DigitalOcean VPCs route pod traffic natively, so the
//!   route controller stays off.
//! - **Inventory** (`<binary> audit`), with `DO_CLUSTER_ID`: the load
//!   balancers tagged `k8s:<DO_CLUSTER_ID>`, owned by their name, then the
//!   public-access firewall, owned by the cluster.
//!
//! The API client paces requests (`DO_API_RATE_LIMIT_QPS`), follows
//! pagination, and turns 429 or a spent `RateLimit-Remaining` into
//! [`CloudError::Throttled`] with the server's reset time, and a refusal
//! for the account's load balancer limit (also a 429) into
//! [`CloudError::QuotaExceeded`]. Each request is
//! described to the framework's request fence just before it is sent
//! (`GET /v2/load_balancers`, the query or the compact JSON body), so a dry
//! run sends the reads and plans the mutations. The token never appears in
//! logs, errors, descriptions or `Debug` output.
//!
//! With the `test-util` feature, `test_util` holds a stateful fake of the
//! API behind a Prism proxy checking DigitalOcean's OpenAPI spec, for this
//! crate's tests and the binary's end-to-end tests.

mod api;
mod config;
mod factory;
mod firewall;
mod instances;
mod inventory;
mod load_balancer;
mod observer;
mod provider_id;
mod region;
mod retag;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
mod volumes;

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

use async_trait::async_trait;
use ccm_cloud_provider::{
    CloudError, CloudProvider, ConfigError, InitContext, Instances, Inventory, LoadBalancer,
    RateLimiter, ServiceObserver, Volumes,
};

pub use config::{
    AccessToken, DEFAULT_API_URL, DEFAULT_METADATA_URL, ENV_ACCESS_TOKEN, ENV_API_RATE_LIMIT_QPS,
    ENV_CLUSTER_ID, ENV_CLUSTER_VPC_ID, ENV_DEBUG_ADDR, ENV_DEFAULT_LB_TYPE, ENV_METADATA_URL,
    ENV_METRICS_ADDR, ENV_OVERRIDE_URL, ENV_PUBLIC_ACCESS_FIREWALL_NAME,
    ENV_PUBLIC_ACCESS_FIREWALL_TAGS, ENV_REGION, LoadBalancerType, PublicAccessFirewall, Settings,
};
pub use factory::DigitalOceanProviderFactory;
pub use instances::MAX_BATCH_SIZE;
pub use inventory::FIREWALL_KIND;
pub use load_balancer::annotations;
#[doc(hidden)]
pub use load_balancer::service_check::check_service;
pub use provider_id::{PROVIDER_ID_PREFIX, droplet_id_from_provider_id};
pub use volumes::DO_CSI_DRIVER;

use api::Client;

/// The provider name: `--cloud-provider=digitalocean`.
pub const PROVIDER_NAME: &str = "digitalocean";

/// DigitalOcean as a [`CloudProvider`].
#[derive(Debug)]
pub struct DigitalOceanProvider {
    api: Client,
    settings: Settings,
    /// The region load balancers are created in, known after `initialize`.
    region: OnceLock<String>,
    /// Service UID → load-balancer ID, for load balancers created before
    /// their ID could be recorded on the Service (while still `new`), so
    /// polling them is one GET rather than a search by name.
    created: Mutex<HashMap<String, String>>,
    /// What the service observer remembers between syncs.
    observed: observer::Observed,
    /// The load balancer each Service's last change saw, for the health
    /// read that follows it.
    seen: load_balancer::health::Seen,
}

impl DigitalOceanProvider {
    /// A provider for `settings`. Does no network I/O.
    ///
    /// # Errors
    /// A [`ConfigError`] when the HTTP client cannot be set up, or when
    /// `rate_limit_qps` is not a rate a pacer can keep.
    pub fn new(settings: Settings) -> Result<Self, ConfigError> {
        let pacer = settings
            .rate_limit_qps
            .map(RateLimiter::pacer)
            .transpose()
            .map_err(|e| {
                ConfigError::new(format!(
                    "environment variable {ENV_API_RATE_LIMIT_QPS}: {e}"
                ))
            })?;
        let api = Client::new(settings.api_url.clone(), &settings.token, pacer)
            .map_err(|e| ConfigError::new(format!("{ENV_ACCESS_TOKEN}: {e}")))?;
        Ok(Self {
            api,
            settings,
            region: OnceLock::new(),
            created: Mutex::new(HashMap::new()),
            observed: observer::Observed::default(),
            seen: load_balancer::health::Seen::default(),
        })
    }

    /// The region, once [`CloudProvider::initialize`] has determined it.
    pub fn region(&self) -> Option<&str> {
        self.region.get().map(String::as_str)
    }
}

#[async_trait]
impl CloudProvider for DigitalOceanProvider {
    fn provider_name(&self) -> &'static str {
        PROVIDER_NAME
    }

    /// Always: as upstream's DigitalOcean CCM, which runs without a cluster
    /// ID. A Service's load balancer is found by the ID recorded on the
    /// Service or by a name derived from the Service's UID, which no other
    /// cluster's Service has; with `DO_CLUSTER_ID` set, load balancers also
    /// carry the `k8s:<DO_CLUSTER_ID>` tag and another cluster's tagged ones
    /// are never touched.
    fn has_cluster_id(&self) -> bool {
        true
    }

    /// Determines the region: `REGION`, checked against the API's region
    /// list (which also proves the token works), or the droplet metadata
    /// service.
    async fn initialize(&self, _ctx: &InitContext) -> Result<(), CloudError> {
        let region = region::resolve(&self.api, &self.settings).await?;
        tracing::info!(region = %region, "DigitalOcean provider initialized");
        // A second initialize finds the same region; keeping the first is fine.
        let _ = self.region.set(region);
        Ok(())
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }

    fn volumes(&self) -> Option<&dyn Volumes> {
        Some(self)
    }

    /// With `DO_CLUSTER_ID`, whose tag marks the cluster's load balancers;
    /// without it another cluster's in the account look the same.
    fn inventory(&self) -> Option<&dyn Inventory> {
        self.has_inventory().then_some(self as &dyn Inventory)
    }

    /// Every request goes through the API client, which describes it to the
    /// fence just before it is sent.
    fn describes_requests(&self) -> bool {
        true
    }

    /// With a public-access firewall or a cluster ID to tag load balancers
    /// with; otherwise there is nothing to observe.
    fn service_observer(&self) -> Option<&dyn ServiceObserver> {
        self.observes_services()
            .then_some(self as &dyn ServiceObserver)
    }
}
