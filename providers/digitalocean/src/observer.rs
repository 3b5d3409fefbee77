//! [`ServiceObserver`]: what upstream's DigitalOcean CCM does with the
//! whole set of Services, on one schedule: the public-access firewall
//! (`firewall`) on every call, and the cluster tag on load balancers
//! (`retag`) at most every [`RETAG_PERIOD`].
//!
//! The app calls [`sync_services`](ServiceObserver::sync_services) after
//! Service changes and every [`RESYNC_PERIOD`], upstream's firewall
//! period. Re-tagging runs on the first call, as upstream's syncer does
//! when it starts, and then on the first call after [`RETAG_PERIOD`] has
//! passed since it last succeeded, so Service changes do not bring it
//! forward.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, ServiceObserver};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::DigitalOceanProvider;
use crate::firewall::FirewallCache;

/// Upstream's firewall reconciliation period.
pub(crate) const RESYNC_PERIOD: Duration = Duration::from_secs(5 * 60);
/// Upstream's tags-syncer period.
pub(crate) const RETAG_PERIOD: Duration = Duration::from_secs(15 * 60);

/// What the observer remembers between calls.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The public-access firewall last seen.
    pub(crate) firewall: FirewallCache,
    /// When re-tagging last succeeded.
    last_retag: Mutex<Option<Instant>>,
}

/// Whether re-tagging is due at `now`, having last succeeded at `last`.
fn retag_due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|last| now.duration_since(last) >= RETAG_PERIOD)
}

impl DigitalOceanProvider {
    /// Whether there is anything to observe: a public-access firewall or a
    /// cluster ID.
    pub(crate) fn observes_services(&self) -> bool {
        self.settings.firewall.is_some() || self.settings.cluster_id.is_some()
    }
}

#[async_trait]
impl ServiceObserver for DigitalOceanProvider {
    fn resync_period(&self) -> Duration {
        RESYNC_PERIOD
    }

    /// Syncs the firewall, then re-tags when due; both run even when the
    /// other fails, and the first error is returned.
    async fn sync_services(&self, services: &[Arc<Service>]) -> Result<(), CloudError> {
        let firewall = match &self.settings.firewall {
            Some(fw) => self.sync_firewall(fw, services).await,
            None => Ok(()),
        };
        let retag = match self.settings.cluster_tag() {
            Some(tag) if retag_due(*self.observed.last_retag.lock(), Instant::now()) => {
                let done = self.retag_load_balancers(&tag, services).await;
                if done.is_ok() {
                    *self.observed.last_retag.lock() = Some(Instant::now());
                }
                done
            }
            _ => Ok(()),
        };
        firewall.and(retag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retagging_runs_first_then_once_per_period() {
        let start = Instant::now();
        assert!(retag_due(None, start));
        assert!(!retag_due(Some(start), start));
        assert!(!retag_due(Some(start), start + RESYNC_PERIOD * 2));
        assert!(retag_due(Some(start), start + RETAG_PERIOD));
    }
}
