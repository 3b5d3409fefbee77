//! [`ServiceObserver`]: the optional capability of a provider that keeps
//! cloud resources in step with the whole set of Services, rather than one
//! load balancer per Service.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Service;

use crate::CloudError;

/// A provider that needs to see every Service of the cluster at once, such
/// as DigitalOcean's public-access firewall (whose inbound rules are the
/// NodePorts of every NodePort and LoadBalancer Service) or a periodic
/// re-tagging of load balancers.
///
/// A provider never talks to the Kubernetes API, so the service-observer
/// controller feeds it the Services from its shared cache.
///
/// # Guarantees
/// - [`sync_services`](Self::sync_services) is called with every Service in
///   the cluster (all types, all namespaces, in no particular order): once
///   the cache has its first full list, after changes (a burst of changes
///   is coalesced into one call), and every
///   [`resync_period`](Self::resync_period) even when nothing changed.
/// - Calls never overlap.
/// - It is only called while this process leads: the call is refused, and
///   retried later, when the leadership fence does not allow cloud
///   mutations.
/// - A failed call is retried with backoff (5 s doubling to 300 s); after
///   [`CloudError::Retry`] or [`CloudError::Throttled`] no sooner than the
///   delay asked for. A newer set of Services may arrive by then.
///
/// # Contract for implementers
/// - `sync_services` may change the cloud. It must be idempotent and
///   converge on the set it is given: the last call wins.
/// - The Services are read-only. Whatever the provider must remember it
///   keeps itself, or in the cloud.
/// - Touch only cloud resources tagged as owned by this cluster.
#[async_trait]
pub trait ServiceObserver: Send + Sync {
    /// How often [`sync_services`](Self::sync_services) is called when no
    /// Service changed. Read once, when the controller starts; must not be
    /// zero.
    fn resync_period(&self) -> Duration;

    /// Brings the cloud in step with `services`, the whole current set.
    ///
    /// # Errors
    /// A [`CloudError`], which the controller logs and retries as above.
    async fn sync_services(&self, services: &[Arc<Service>]) -> Result<(), CloudError>;
}
