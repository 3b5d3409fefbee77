//! The service controller (upstream's `service-lb-controller`): a cloud load
//! balancer for every Service of type LoadBalancer.
//!
//! # Guarantees
//! - Only Services of type LoadBalancer without `spec.loadBalancerClass` get
//!   a load balancer. Every other Service is left alone, unless it still
//!   carries our finalizer: then its load balancer is deleted, its
//!   `status.loadBalancer` cleared, and the finalizer removed, in that order.
//! - The finalizer `service.kubernetes.io/load-balancer-cleanup` is stored
//!   before the provider is asked to create anything, and removed only once
//!   the provider confirmed the deletion, so no load balancer leaks, even for
//!   a Service deleted while the CCM was down. A cleanup retried because a
//!   write to the Service failed does not ask the provider again, unless the
//!   Service changed or was ensured since the confirmed deletion.
//! - A Service another controller implements (the provider answers
//!   `ImplementedElsewhere` before the claim: from the Service alone through
//!   `check_service`, else read-only with `get_load_balancer`) or that is
//!   malformed gets no finalizer and no ingress (a malformed one gets its
//!   Warning event and `LoadBalancerProvisioned=False/InvalidAnnotation`),
//!   and the provider is not asked about it again until it changes. The fake, AWS and DigitalOcean providers answer from the
//!   Service alone, so a new Service costs one ensure, as upstream's.
//! - The provider is called only when something it reads changed since the
//!   last success: the Service's ports, protocols, annotations, traffic
//!   policy, health-check node port, IP families or source ranges (an
//!   ensure), or the names and provider IDs of the eligible nodes (an update
//!   of the backends). Node heartbeats and condition flaps, labels, and this
//!   controller's own writes cost no provider mutation. A burst of node-set
//!   changes costs one update per load balancer.
//! - Every Service it owns carries `LoadBalancerProvisioned` (Pending once
//!   claimed, True with the ingress, False with the failure's reason) and,
//!   when the provider can tell and `--load-balancer-target-health` is on,
//!   `LoadBalancerTargetsHealthy`: strategic-merge patches on `/status`
//!   that keep other writers' conditions, the first with the ingress, each
//!   only when something changed. Target health is read
//!   after each ensure or update, at once after a node's shutdown taint
//!   comes or goes, at most once a minute after readiness flaps, and with
//!   backoff (5 s to 60 s) while not every target is healthy; never for a
//!   steady healthy load balancer. Our conditions leave with the load
//!   balancer.
//! - `status.loadBalancer.ingress` is written through `/status`, only when
//!   it changed (with the conditions); annotations the provider asks to record are merged into the
//!   Service's, only when one differs.
//! - Bad input (`InvalidInput`) gets a Warning event naming the field and
//!   changes nothing in the cloud; it is not retried until the Service
//!   changes. `Retry` and `Throttled` are retried after the delay the
//!   provider asked for, without an event; any other failure gets a Warning
//!   event and is retried with backoff (5 s doubling to 300 s).
//! - Every cloud mutation goes through the context's fenced cloud.

mod condition_metrics;
mod conditions;
mod eligible;
mod health;
mod load_balancer;
mod node_sync;
mod readiness;
mod records;
mod reporting;
pub(crate) mod spec;
mod states;
mod status;
mod writes;

use std::collections::BTreeMap;
use std::sync::Arc;

use ccm_cloud_provider::CloudProvider;
use ccm_runtime::controller::{self, ControllerConfig, Triggers};
use ccm_runtime::{Action, Context, Events, Informer, MeteredCloud, ReconcileError, WatchEvent};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::runtime::reflector::Store;
use parking_lot::{Mutex, MutexGuard};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::settings::ControllerSettings;
use crate::{ControllerId, Started};
use eligible::{EligibleTracker, NodeSet};
use node_sync::{NodeSync, Round};
use readiness::{NodeSignals, ReadinessTracker};
use records::{Failure, Next, Records, decide, key_of};

/// Upstream's component name for this controller's events.
const EVENT_SOURCE: &str = "service-controller";

/// Upstream's `service_controller_*` metrics.
#[derive(Debug, Clone)]
struct ServiceMetrics {
    /// Ensures and updates of load balancers.
    syncs: Counter,
    /// Failed updates of a load balancer's nodes.
    node_sync_errors: Counter,
    /// Seconds one update of a load balancer's nodes took.
    update_latency: Histogram,
    /// Services whose last load-balancer sync failed (ours, with
    /// `states::States` reading them at scrape time).
    failing: states::Failing,
}

impl ServiceMetrics {
    /// Registers upstream's metrics; returns them and the node-sync latency.
    fn register(
        ctx: &Context,
        services: Store<Service>,
        failing: states::Failing,
    ) -> (Self, Histogram) {
        // 1 s to 16384 s, as upstream.
        let buckets = || Histogram::new(exponential_buckets(1.0, 2.0, 15));
        let metrics = Self {
            syncs: Counter::default(),
            node_sync_errors: Counter::default(),
            update_latency: buckets(),
            failing,
        };
        let node_sync_latency = buckets();
        ctx.metrics.register(|registry| {
            registry.register(
                "service_controller_loadbalancer_sync",
                "A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster",
                metrics.syncs.clone(),
            );
            registry.register(
                "service_controller_nodesync_error",
                "A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster",
                metrics.node_sync_errors.clone(),
            );
            registry.register(
                "service_controller_nodesync_latency_seconds",
                "A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.",
                node_sync_latency.clone(),
            );
            registry.register(
                "service_controller_update_loadbalancer_host_latency_seconds",
                "A metric measuring the latency for updating each load balancer hosts.",
                metrics.update_latency.clone(),
            );
            registry.register_collector(Box::new(states::States {
                services,
                failing: metrics.failing.clone(),
            }));
        });
        (metrics, node_sync_latency)
    }
}

struct ServiceController {
    cloud: Arc<MeteredCloud>,
    cluster_name: String,
    writes: writes::ServiceWrites,
    events: Events,
    nodes: Arc<Informer<Node>>,
    records: Arc<Mutex<Records>>,
    round: Arc<Round>,
    metrics: ServiceMetrics,
    conditions: condition_metrics::ConditionMetrics,
    /// `--load-balancer-target-health`: whether target health is read.
    target_health: bool,
    /// Counts flips of nodes' readiness and shutdown taints: a target's
    /// health may follow.
    readiness: watch::Receiver<NodeSignals>,
}

pub(crate) fn start(ctx: &Context, settings: &ControllerSettings) -> Started {
    if ctx.cloud.load_balancer().is_none() {
        return Started::Off("the cloud provider has no load-balancer capability".into());
    }
    let services = ctx.informers.services();
    let nodes = ctx.informers.nodes();
    let records = Arc::new(Mutex::new(Records::default()));

    let (changed, changes) = watch::channel(0u64);
    let (flipped, readiness) = watch::channel(NodeSignals::default());
    let tracker = Mutex::new((EligibleTracker::default(), ReadinessTracker::default()));
    let node_hook = move |event: &WatchEvent<Node>| {
        let (eligible, ready) = &mut *tracker.lock();
        if eligible.apply(event) {
            changed.send_modify(|generation| *generation += 1);
        }
        let flip = ready.apply(event);
        flipped.send_if_modified(|signals| signals.count(flip));
    };
    let failing = states::Failing::default();
    let conditions = condition_metrics::ConditionMetrics::register(ctx);
    let service_hook = {
        let records = records.clone();
        let failing = failing.clone();
        let unhealthy = conditions.unhealthy.clone();
        move |event: &WatchEvent<Service>| {
            if let WatchEvent::Delete(service) = event {
                records.lock().deleted(service, Instant::now());
                failing.forget(service);
                unhealthy.forget(service);
            }
        }
    };
    if let Err(err) = nodes
        .on_event(node_hook)
        .and_then(|()| services.on_event(service_hook))
    {
        return Started::Off(err.to_string());
    }

    let (metrics, node_sync_latency) = ServiceMetrics::register(ctx, services.store(), failing);
    let round = Arc::new(Round::new(node_sync_latency));
    let state = Arc::new(ServiceController {
        cloud: ctx.cloud.clone(),
        cluster_name: ctx.cluster_name.clone(),
        writes: writes::ServiceWrites::new(ctx.client.clone()),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        nodes: nodes.clone(),
        records: records.clone(),
        round: round.clone(),
        metrics,
        conditions,
        target_health: settings.load_balancer_target_health,
        readiness: readiness.clone(),
    });
    let (trigger, triggered) = futures::channel::mpsc::unbounded();
    let triggers = Triggers {
        objects: Some(triggered.boxed()),
        all: None,
    };
    let config = ControllerConfig {
        name: ControllerId::Service.name(),
        concurrency: settings.concurrent_service_syncs,
    };
    let reconciles = match controller::run(
        config,
        &services,
        triggers,
        ctx.metrics.clone(),
        ctx.shutdown.clone(),
        move |service| state.clone().reconcile(service),
    ) {
        Ok(future) => future,
        Err(err) => return Started::Off(err.to_string()),
    };
    let period = if settings.node_sync_period.is_zero() {
        node_sync::DEFAULT_PERIOD
    } else {
        settings.node_sync_period
    };
    let node_sync = NodeSync {
        changes,
        readiness,
        services,
        nodes,
        records,
        trigger,
        period,
        round,
        activity: ctx.metrics.activity(),
    };
    let shutdown = ctx.shutdown.clone();
    Started::Running(
        async move {
            tokio::select! {
                () = reconciles => {}
                () = node_sync.run() => {}
                () = shutdown.cancelled() => {}
            }
        }
        .boxed(),
    )
}

impl ServiceController {
    fn records(&self) -> MutexGuard<'_, Records> {
        self.records.lock()
    }

    async fn reconcile(self: Arc<Self>, service: Arc<Service>) -> Result<Action, ReconcileError> {
        // Before the first list of nodes, every load balancer would look
        // like it has no backends.
        self.nodes.wait_until_ready().await;
        let key = key_of(&service);
        if !spec::is_ours(&service) {
            self.records().forget(&key);
            self.metrics.failing.forget(&service);
            // Conditions this controller wrote before the Service stopped
            // being its own (a malformed one that was never claimed).
            if conditions::has_ours(&service) {
                let mut versions = load_balancer::Versions::new(&service);
                self.write_status(&service, None, &[], true, &mut versions)
                    .await?;
            }
            return Ok(Action::await_change());
        }
        let nodes = NodeSet::from_store(&self.nodes.store());
        let fingerprint = spec::fingerprint(&service, &BTreeMap::new());
        let next = {
            let records = self.records();
            // The last version of a Service deleted since this reconcile
            // was handed it: its load balancer went before its finalizer.
            if records.is_gone(&service) {
                self.round.done(&key);
                return Ok(Action::await_change());
            }
            if records.is_superseded(&service) {
                self.round.done(&key);
                let wait = records.health_wait(&key, Instant::now());
                return Ok(wait.map_or_else(Action::await_change, Action::requeue));
            }
            // The watch event of this controller's own failure report.
            if let Some(wait) = records.reported_failure_wait(&service, Instant::now()) {
                self.round.done(&key);
                return Ok(Action::requeue(wait));
            }
            decide(&service, records.get(&key), fingerprint, nodes.identity)
        };
        let result = match next {
            Next::LeaveAlone => {
                self.records().forget(&key);
                Ok(())
            }
            Next::Cleanup => self.cleanup(&service, fingerprint).await,
            Next::UpToDate => self.restore_ingress(&service).await,
            // The ingress too: an ensure whose status write failed is
            // followed by node changes (an update of the backends, not an
            // ensure), and nothing else would ever write it.
            Next::UpdateHosts => match self.update_hosts(&service, &nodes, fingerprint).await {
                Ok(()) => {
                    self.health_changed(&service);
                    self.restore_ingress(&service).await
                }
                failed => failed,
            },
            Next::Ensure { check_owner } => {
                self.ensure(&service, &nodes, fingerprint, check_owner)
                    .await
            }
        };
        self.round.done(&key);
        self.metrics.failing.record(&service, result.is_ok());
        {
            let mut records = self.records();
            match &result {
                Ok(()) => records.succeeded(&key),
                Err(err) => {
                    let record = records.entry(&service);
                    let count = record.failure.map_or(1, |f| f.count.saturating_add(1));
                    record.failure = Some(Failure {
                        at: Instant::now(),
                        retry: err.retry(),
                        count,
                    });
                }
            }
        }
        result?;
        if matches!(next, Next::LeaveAlone | Next::Cleanup) {
            return Ok(Action::await_change());
        }
        let wait = self.follow_health(&service, &nodes).await?;
        Ok(wait.map_or_else(Action::await_change, Action::requeue))
    }
}
