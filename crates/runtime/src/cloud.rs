//! The provider as controllers see it: every call counted and timed, and
//! every mutation fenced by leadership.

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::fence::RequestFence;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use ccm_cloud_provider::{
    BatchResult, CloudError, CloudProvider, EnsuredLoadBalancer, InitContext, InstanceMetadata,
    Instances, LoadBalancer, LoadBalancerStatus, Routes, ServiceObserver, Volumes,
};
use tokio::time::Instant;

use crate::dry_run::Plan;
use crate::metrics::{CloudCallLabels, Metrics, OperationLabels};
use planned::service_key;
mod classes;
mod fence;
mod inventory;
mod planned;
mod provider_controllers;
mod routes;

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

    async fn observe<T>(
        &self,
        operation: &'static str,
        batch: Option<usize>,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        self.metered(operation, batch, false, call).await
    }

    /// [`MeteredCloud::observe`], for a mutation when `fenced`.
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

    async fn mutate<T>(
        &self,
        operation: &'static str,
        object: impl FnOnce() -> String,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        if let Some(plan) = &self.dry_run {
            return self.planned(plan, operation, None, object(), call).await;
        }
        // Refused at once when not leading; checked again after any wait.
        self.check_fence(operation)?;
        self.metered(operation, None, true, call).await
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

    /// [`MeteredCloud::mutate`] for a batch call over `batch` objects.
    async fn mutate_batch<T>(
        &self,
        operation: &'static str,
        batch: usize,
        object: impl FnOnce() -> String,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        if let Some(plan) = &self.dry_run {
            return self
                .planned(plan, operation, Some(batch), object(), call)
                .await;
        }
        self.check_fence(operation)?;
        self.metered(operation, Some(batch), true, call).await
    }

    fn instances_inner(&self) -> Result<&dyn Instances, CloudError> {
        self.inner.instances().ok_or(CloudError::NotImplemented)
    }

    fn load_balancer_inner(&self) -> Result<&dyn LoadBalancer, CloudError> {
        self.inner.load_balancer().ok_or(CloudError::NotImplemented)
    }

    fn routes_inner(&self) -> Result<&dyn Routes, CloudError> {
        self.inner.routes().ok_or(CloudError::NotImplemented)
    }

    fn volumes_inner(&self) -> Result<&dyn Volumes, CloudError> {
        self.inner.volumes().ok_or(CloudError::NotImplemented)
    }

    fn service_observer_inner(&self) -> Result<&dyn ServiceObserver, CloudError> {
        self.inner
            .service_observer()
            .ok_or(CloudError::NotImplemented)
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
        self.observe("initialize", None, self.inner.initialize(ctx))
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

    fn instance_tags(&self) -> Option<&dyn ccm_cloud_provider::InstanceTags> {
        self.inner
            .instance_tags()
            .map(|_| self as &dyn ccm_cloud_provider::InstanceTags)
    }

    fn inventory(&self) -> Option<&dyn ccm_cloud_provider::Inventory> {
        self.inner
            .inventory()
            .map(|_| self as &dyn ccm_cloud_provider::Inventory)
    }

    fn describes_requests(&self) -> bool {
        self.inner.describes_requests()
    }

    fn pod_cidrs(&self) -> Option<&dyn ccm_cloud_provider::PodCidrs> {
        self.inner
            .pod_cidrs()
            .map(|_| self as &dyn ccm_cloud_provider::PodCidrs)
    }

    fn encode_metrics(&self, out: &mut String) {
        self.inner.encode_metrics(out);
    }
}

#[async_trait]
impl Instances for MeteredCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.observe("instance_exists", None, async {
            self.instances_inner()?.instance_exists(node).await
        })
        .await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.observe("instance_shutdown", None, async {
            self.instances_inner()?.instance_shutdown(node).await
        })
        .await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.observe("instance_metadata", None, async {
            self.instances_inner()?.instance_metadata(node).await
        })
        .await
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        self.inner
            .instances()
            .map_or(NonZeroUsize::MIN, Instances::max_batch_size)
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.observe("instances_exist", Some(nodes.len()), async {
            self.instances_inner()?.instances_exist(nodes).await
        })
        .await
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.observe("instances_shutdown", Some(nodes.len()), async {
            self.instances_inner()?.instances_shutdown(nodes).await
        })
        .await
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        self.observe("instances_metadata", Some(nodes.len()), async {
            self.instances_inner()?.instances_metadata(nodes).await
        })
        .await
    }
}

#[async_trait]
impl LoadBalancer for MeteredCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.observe("get_load_balancer", None, async {
            self.load_balancer_inner()?
                .get_load_balancer(cluster_name, service)
                .await
        })
        .await
    }

    fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        match self.inner.load_balancer() {
            Some(lb) => lb.load_balancer_name(cluster_name, service),
            None => ccm_cloud_provider::default_load_balancer_name(service),
        }
    }

    /// Not a cloud call: neither metered nor fenced.
    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        self.inner.load_balancer()?.check_service(service)
    }

    fn annotation_schema(
        &self,
    ) -> Option<&'static ccm_cloud_provider::annotations::AnnotationSchema> {
        self.inner.load_balancer()?.annotation_schema()
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        self.mutate("ensure_load_balancer", || service_key(service), async {
            self.load_balancer_inner()?
                .ensure_load_balancer(cluster_name, service, nodes)
                .await
        })
        .await
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        self.mutate("update_load_balancer", || service_key(service), async {
            self.load_balancer_inner()?
                .update_load_balancer(cluster_name, service, nodes)
                .await
        })
        .await
    }

    /// A read: metered, not fenced, and asked in dry-run too.
    async fn load_balancer_health(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Option<ccm_cloud_provider::LoadBalancerHealth>, CloudError> {
        self.observe("load_balancer_health", None, async {
            self.load_balancer_inner()?
                .load_balancer_health(cluster_name, service, nodes)
                .await
        })
        .await
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        self.mutate(
            "ensure_load_balancer_deleted",
            || service_key(service),
            async {
                self.load_balancer_inner()?
                    .ensure_load_balancer_deleted(cluster_name, service)
                    .await
            },
        )
        .await
    }
}

/// Volume lookups are reads, counted and timed like the instance batch
/// calls and not fenced.
#[async_trait]
impl Volumes for MeteredCloud {
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        self.inner.volumes()?.volume_id(pv)
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        self.inner
            .volumes()
            .map_or(NonZeroUsize::MIN, Volumes::max_batch_size)
    }

    async fn volumes_labels(
        &self,
        ids: &[String],
    ) -> BatchResult<Option<BTreeMap<String, String>>> {
        self.observe("volumes_labels", Some(ids.len()), async {
            self.volumes_inner()?.volumes_labels(ids).await
        })
        .await
    }
}

/// `sync_services` may change the cloud, so it is fenced like any mutation.
#[async_trait]
impl ServiceObserver for MeteredCloud {
    fn resync_period(&self) -> Duration {
        self.inner
            .service_observer()
            .map_or(Duration::MAX, ServiceObserver::resync_period)
    }

    async fn sync_services(&self, services: &[Arc<Service>]) -> Result<(), CloudError> {
        let object = || format!("{} Services", services.len());
        self.mutate("sync_services", object, async {
            self.service_observer_inner()?.sync_services(services).await
        })
        .await
    }
}
