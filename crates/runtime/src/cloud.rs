//! The provider as controllers see it: every call counted and timed, and
//! every mutation fenced by leadership.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::fence::RequestFence;
use ccm_cloud_provider::{
    CloudError, CloudProvider, InitContext, InstanceTags, Instances, Inventory, LoadBalancer,
    PodCidrs, Routes, ServiceObserver, Volumes,
};
use tokio::time::Instant;

use crate::dry_run::Plan;
use crate::metrics::{CloudCallLabels, Metrics, OperationLabels};
mod capabilities;
mod classes;
mod fence;
mod mirror;
mod planned;

use classes::{Class, Classes};
use fence::PerRequest;
pub use fence::{AlwaysLeader, Fence, Fenced};

/// How soon a fenced mutation is retried: by then this process has either
/// renewed its lease or exited.
const FENCED_RETRY: Duration = Duration::from_secs(2);

/// Wraps a provider so that every interface call is counted and timed by
/// operation and outcome, and every mutation first passes the [`Fence`].
/// Once the cloud answers `Throttled`, calls are paced to the rate it allows
/// instead of being refused in a herd, and the route and load-balancer
/// mutations in flight are cut to what it takes, each class on its own
/// (`classes`).
///
/// It implements the interface itself, so controllers use it as a provider;
/// a capability is present exactly when the wrapped provider has it.
#[derive(Debug)]
pub struct MeteredCloud {
    inner: Arc<dyn CloudProvider>,
    metrics: Metrics,
    fence: Arc<dyn Fence>,
    classes: Classes,
    dry_run: Option<Plan>,
}

/// How soon a reconcile whose mutation a dry run planned is tried again:
/// the plan is refreshed then (and logged only if it changed).
const DRY_RUN_RECHECK: Duration = Duration::from_secs(300);

impl MeteredCloud {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn CloudProvider>, metrics: Metrics, fence: Arc<dyn Fence>) -> Self {
        Self {
            classes: Classes::new(&metrics),
            inner,
            metrics,
            fence,
            dry_run: None,
        }
    }

    /// The same wrapper as a dry run (`--dry-run`): every mutation is
    /// planned in `plan` instead of made. A provider that describes its
    /// requests ([`CloudProvider::describes_requests`]) is called with its
    /// mutating requests refused, so its reads tell whether the change is
    /// already in place; any other provider is not called at all. The
    /// controller gets `Retry` in five minutes for a planned change.
    #[must_use]
    pub fn dry_run(mut self, plan: Plan) -> Self {
        self.dry_run = Some(plan);
        self
    }

    /// The dry run's plan, when this is one.
    pub fn plan(&self) -> Option<&Plan> {
        self.dry_run.as_ref()
    }

    /// The fence's answer for a Kubernetes write that destroys or releases
    /// (a node's deletion, a finalizer's removal), checked just before it
    /// is sent: the same `Retry` a fenced cloud mutation gets. Not counted
    /// as a cloud call.
    ///
    /// # Errors
    /// [`CloudError::Retry`] when this process must not write now.
    pub fn check_leadership(&self) -> Result<(), CloudError> {
        self.fence.check().map_err(|reason| CloudError::Retry {
            after: FENCED_RETRY,
            reason: format!("refusing to write: {reason}"),
        })
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<dyn CloudProvider> {
        &self.inner
    }

    /// Runs `call` counted and timed, and paced and limited by its class;
    /// fenced when `fenced`.
    async fn metered<T>(
        &self,
        operation: &'static str,
        batch: Option<usize>,
        fenced: bool,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        let class = Class::of(operation);
        let permit = self.classes.permit(class).await;
        let pacer = self.classes.pacer(class);
        pacer.wait_turn().await;
        // Checked once the call may go: a wait for room or in the pacer can
        // outlast the lease.
        if fenced {
            self.check_fence(operation)?;
        }
        self.metrics.activity.cloud_call();
        let start = Instant::now();
        let result = if fenced {
            self.within_term(call).await
        } else {
            call.await
        };
        match &result {
            Ok(_) => {
                pacer.succeeded();
                if let Some(permit) = permit {
                    permit.succeeded();
                }
            }
            Err(CloudError::Throttled { retry_after }) => {
                pacer.throttled(*retry_after);
                if let Some(permit) = permit {
                    permit.throttled();
                }
            }
            Err(_) => drop(permit),
        }
        let op = OperationLabels {
            operation: operation.into(),
        };
        self.metrics
            .cloud_call_duration
            .get_or_create(&op)
            .observe(start.elapsed().as_secs_f64());
        if let Some(n) = batch {
            self.metrics
                .cloud_batch_size
                .get_or_create(&op)
                .observe(n as f64);
        }
        let outcome = match &result {
            Ok(_) => "success",
            Err(err) => err.kind(),
        };
        self.metrics
            .cloud_calls
            .get_or_create(&CloudCallLabels {
                operation: operation.into(),
                outcome: outcome.into(),
            })
            .inc();
        result
    }

    /// Runs the mutation `call` fenced, or in a dry run planned under
    /// `object`; `batch` is the number of objects a batch call covers.
    async fn mutate<T>(
        &self,
        operation: &'static str,
        batch: Option<usize>,
        object: impl FnOnce() -> String,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        if let Some(plan) = &self.dry_run {
            return self.planned(plan, operation, batch, object(), call).await;
        }
        // Refused at once when not leading; checked again after any wait.
        self.check_fence(operation)?;
        self.metered(operation, batch, true, call).await
    }

    /// Runs a fenced `call`, cancelling it when the lease term it started
    /// in lapses without a renewal: no cloud change is still in flight
    /// once another process may lead.
    ///
    /// Every request the provider sends meanwhile is fenced too: the call
    /// runs in a [`ccm_cloud_provider::fence::scope`] whose check is this
    /// process's leadership.
    async fn within_term<T>(
        &self,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        let fence: Arc<dyn RequestFence> = Arc::new(PerRequest(self.fence.clone()));
        let mut call = std::pin::pin!(ccm_cloud_provider::fence::scope(fence, call));
        loop {
            let Some(lapses) = self.fence.lapses_at() else {
                return call.await;
            };
            tokio::select! {
                result = &mut call => return result,
                () = tokio::time::sleep_until(lapses) => {
                    if let Err(reason) = self.fence.check() {
                        return Err(CloudError::Retry {
                            after: FENCED_RETRY,
                            reason: format!("cancelled while it ran: {reason}"),
                        });
                    }
                }
            }
        }
    }

    /// The fence's answer for a mutation, counted as `fenced` when it
    /// refuses.
    fn check_fence(&self, operation: &'static str) -> Result<(), CloudError> {
        let Err(reason) = self.fence.check() else {
            return Ok(());
        };
        self.metrics.activity.cloud_call();
        self.metrics
            .cloud_calls
            .get_or_create(&CloudCallLabels {
                operation: operation.into(),
                outcome: "fenced".into(),
            })
            .inc();
        Err(CloudError::Retry {
            after: FENCED_RETRY,
            reason: format!("refusing to change the cloud: {reason}"),
        })
    }
}

#[async_trait]
impl CloudProvider for MeteredCloud {
    fn provider_name(&self) -> &'static str {
        self.inner.provider_name()
    }

    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }

    async fn initialize(&self, ctx: &InitContext) -> Result<(), CloudError> {
        self.metered("initialize", None, false, self.inner.initialize(ctx))
            .await
    }

    fn instances(&self) -> Option<&dyn Instances> {
        self.inner.instances().map(|_| self as &dyn Instances)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.inner
            .load_balancer()
            .map(|_| self as &dyn LoadBalancer)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        self.inner.routes().map(|_| self as &dyn Routes)
    }

    fn service_observer(&self) -> Option<&dyn ServiceObserver> {
        self.inner
            .service_observer()
            .map(|_| self as &dyn ServiceObserver)
    }

    fn volumes(&self) -> Option<&dyn Volumes> {
        self.inner.volumes().map(|_| self as &dyn Volumes)
    }

    fn instance_tags(&self) -> Option<&dyn InstanceTags> {
        self.inner
            .instance_tags()
            .map(|_| self as &dyn InstanceTags)
    }

    fn inventory(&self) -> Option<&dyn Inventory> {
        self.inner.inventory().map(|_| self as &dyn Inventory)
    }

    fn describes_requests(&self) -> bool {
        self.inner.describes_requests()
    }

    fn pod_cidrs(&self) -> Option<&dyn PodCidrs> {
        self.inner.pod_cidrs().map(|_| self as &dyn PodCidrs)
    }

    fn encode_metrics(&self, out: &mut String) {
        self.inner.encode_metrics(out);
    }
}
