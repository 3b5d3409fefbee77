//! The service-observer controller: hands a provider's
//! [`ServiceObserver`] the whole set of Services, for cloud resources that
//! depend on all of them at once (such as a firewall open on every
//! NodePort).
//!
//! It is not one of upstream's controllers, so `--controllers` does not name
//! it: it runs, under the main Lease, exactly when the provider offers a
//! `ServiceObserver`.
//!
//! # Guarantees
//! - `sync_services` gets every Service in the shared cache (all types, all
//!   namespaces): once the cache has its first full list, [`QUIET`] after
//!   the last of a burst of changes (but never later than [`MAX_DELAY`]
//!   after the first), and every `resync_period` after the last success.
//! - A change that arrives during a call is followed by another call.
//! - A failed call is retried after a backoff of 5 s doubling to 300 s,
//!   reset by a success; after `Retry` or `Throttled` after exactly the
//!   delay the provider asked for. Each attempt reads the cache afresh.
//! - Calls go through the context's fenced cloud, so none reaches the
//!   provider while this process may not lead (a refused call is retried
//!   every 2 s).
//! - It stops when the context's shutdown is cancelled.

use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider, ServiceObserver};
use ccm_runtime::{Activity, Context, FailureBackoff, Informer};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Service;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::Started;
use crate::deadline::far_deadline;

/// The name the controller goes by in logs and metrics.
pub const SERVICE_OBSERVER: &str = "service-observer";
/// How long the Services must stay unchanged before a change is passed on.
const QUIET: Duration = Duration::from_secs(1);
/// The longest a change waits for the Services to become quiet.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// Sets up the service-observer controller when the context's provider
/// offers a [`ServiceObserver`], and says why it is off otherwise.
///
/// Call it before the context's informers start: it subscribes to the
/// shared Service informer here.
pub fn start_service_observer(ctx: &Context) -> Started {
    let Some(observer) = ctx.cloud.service_observer() else {
        return Started::Off("the cloud provider does not observe Services".into());
    };
    let period = observer.resync_period();
    if period.is_zero() {
        return Started::Off("the cloud provider's Service resync period is zero".into());
    }
    let trigger = Arc::new(Notify::new());
    let informer = ctx.informers.services();
    let notify = trigger.clone();
    if let Err(err) = informer.on_event(move |_| notify.notify_one()) {
        return Started::Off(err.to_string());
    }
    let controller = ServiceObserverController {
        cloud: ctx.cloud.clone(),
        informer,
        trigger,
        period,
        activity: ctx.metrics.activity(),
    };
    let shutdown = ctx.shutdown.clone();
    Started::Running(
        async move {
            tokio::select! {
                () = controller.run() => {}
                () = shutdown.cancelled() => {}
            }
        }
        .boxed(),
    )
}

struct ServiceObserverController {
    cloud: Arc<dyn ServiceObserver>,
    informer: Arc<Informer<Service>>,
    /// Notified by every Service event.
    trigger: Arc<Notify>,
    /// The provider's `resync_period`.
    period: Duration,
    /// Where a coalescing wait and each call count as running.
    activity: Activity,
}

impl ServiceObserverController {
    async fn run(&self) {
        self.informer.wait_until_ready().await;
        // The events of the first list are covered by the first call.
        let _ = self.trigger.notified().now_or_never();
        tracing::info!(resync_period = ?self.period, "{SERVICE_OBSERVER} controller started");
        let backoff = FailureBackoff::<()>::controller_default();
        loop {
            self.sync(&backoff).await;
            let resync = far_deadline(Instant::now(), self.period);
            tokio::select! {
                () = self.trigger.notified() => {
                    let _busy = self.activity.busy();
                    self.coalesce().await;
                }
                () = tokio::time::sleep_until(resync) => {}
            }
        }
    }

    /// Waits until no change arrived for [`QUIET`], or [`MAX_DELAY`] after
    /// the change that woke it.
    async fn coalesce(&self) {
        let deadline = Instant::now() + MAX_DELAY;
        // Each turn either ends the wait or consumes a change; past the
        // deadline it ends.
        while Instant::now() < deadline {
            let quiet = (Instant::now() + QUIET).min(deadline);
            tokio::select! {
                () = self.trigger.notified() => {}
                () = tokio::time::sleep_until(quiet) => return,
            }
        }
    }

    /// Calls the provider with the current Services until a call succeeds,
    /// waiting between attempts as the module's guarantees say.
    async fn sync(&self, backoff: &FailureBackoff<()>) {
        loop {
            let services = self.informer.store().state();
            let result = {
                // Only the call counts as running: a backoff is not work
                // left to do.
                let _busy = self.activity.busy();
                self.cloud.sync_services(&services).await
            };
            let Err(err) = result else {
                backoff.reset(&());
                tracing::debug!(services = services.len(), "synced Services with the cloud");
                return;
            };
            let delay = retry_delay(&err, backoff);
            if err.requested_delay().is_some() {
                tracing::info!(error = %err, ?delay, "the provider asked to sync Services later");
            } else {
                tracing::warn!(error = %err, ?delay, "could not sync Services with the cloud; retrying");
            }
            tokio::time::sleep(delay).await;
        }
    }
}

/// How long to wait after `err`: the provider's delay when it asked for
/// one (not a failure, so the backoff does not grow), else the next step
/// of `backoff`.
fn retry_delay(err: &CloudError, backoff: &FailureBackoff<()>) -> Duration {
    err.requested_delay().unwrap_or_else(|| backoff.fail(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_delay_wins_and_other_failures_back_off() {
        let backoff = FailureBackoff::<()>::controller_default();
        let other = CloudError::msg("down");
        let secs: Vec<u64> = (0..8)
            .map(|_| retry_delay(&other, &backoff).as_secs())
            .collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300]);
        let throttled = CloudError::Throttled {
            retry_after: Duration::from_millis(1500),
        };
        assert_eq!(
            retry_delay(&throttled, &backoff),
            Duration::from_millis(1500)
        );
        backoff.reset(&());
        assert_eq!(retry_delay(&other, &backoff), Duration::from_secs(5));
    }
}
