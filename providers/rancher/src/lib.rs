//! Rancher: the cloud-provider interface over Rancher 1.x's Cattle
//! `v2-beta` API, the drop-in for `rancher/rancher-cloud-controller-manager`.
//!
//! Rancher 1.x is end-of-life; this provider exists because the Kubernetes
//! documentation this project started from names Rancher's CCM as a model,
//! and because its load balancer (a Rancher `LoadBalancerService` in the
//! `kubernetes-loadbalancers` stack, linked to one `ExternalService` per
//! node) is unlike any single cloud resource.
//!
//! Started with `cargo xtask new-provider rancher`; then:
//! - `config`: `CATTLE_URL`, `CATTLE_ACCESS_KEY`, `CATTLE_SECRET_KEY`, or
//!   upstream's `[Global]` cloud config.
//! - `factory`: [`RancherProviderFactory`], how the binary builds the provider.
//! - `cattle`: the API's resources on the wire, as `go-rancher/v2` names them.
//! - `api`: the HTTP client (collections, links, actions, errors).
//! - `instances`: hosts, found by provider ID or upstream's name matching,
//!   one host list per batch.
//! - `load_balancer`: upstream's load balancers, adopted as they are.
//! - `emulator` (feature `test-util`): a Cattle API emulator over HTTP.

mod api;
pub mod cattle;
mod config;
#[cfg(any(test, feature = "test-util"))]
pub mod emulator;
mod factory;
mod instances;
mod load_balancer;

use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::{CloudProvider, Instances, LoadBalancer};

pub use config::{ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE, SecretKey, Settings, URL_VARIABLE};
pub use factory::RancherProviderFactory;
pub use load_balancer::{CLUSTER_KEY, SERVICE_KEY, external_service_name, load_balancer_name};

/// The provider name: `--cloud-provider=rancher`.
pub const PROVIDER_NAME: &str = "rancher";

/// The scheme of this cloud's provider IDs: `rancher://<host uuid>`, as
/// upstream's node controller makes them from `InstanceID`.
pub const PROVIDER_ID_PREFIX: &str = "rancher://";

/// Rancher as a [`CloudProvider`].
#[derive(Debug, Clone)]
pub struct RancherProvider {
    client: Arc<api::Client>,
}

impl RancherProvider {
    /// A provider calling the API `settings` names. No network I/O.
    ///
    /// # Errors
    /// When the HTTP client cannot be set up (TLS).
    pub fn new(settings: &Settings) -> Result<Self, ccm_cloud_provider::ConfigError> {
        let client = api::Client::new(settings).map_err(|e| {
            ccm_cloud_provider::ConfigError::new(format!("Rancher API client: {e}"))
        })?;
        Ok(Self {
            client: Arc::new(client),
        })
    }
}

#[async_trait]
impl CloudProvider for RancherProvider {
    fn provider_name(&self) -> &'static str {
        PROVIDER_NAME
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }

    fn describes_requests(&self) -> bool {
        true
    }
}
