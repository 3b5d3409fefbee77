//! The route controller (upstream's `node-route-controller`): one cloud
//! route per pod CIDR of each node, and the node condition
//! `NetworkUnavailable`.
//!
//! A pass lists the cloud's routes once, creates the missing ones and
//! deletes the stale ones in parallel, then sets each node's condition. The
//! pass's creates go to the provider as one batch (`Routes::create_routes`),
//! so a provider that batches them pays its route-table read and instance
//! lookup once per pass, not once per route.
//! Passes run when a node is added or deleted or its pod CIDRs change
//! (debounced), and every `--route-reconciliation-period` as a safety net.
//! With upstream's `CloudControllerManagerWatchBasedRoutesReconciliation`
//! gate, as upstream's route controller does with it: the safety net is
//! the informer resync instead (every 12 to 24 hours by default), and
//! passes start at least 10 s apart (a node event after a quiet spell runs
//! one at once).
//!
//! # Guarantees
//! - One `list_routes` call per pass, however many nodes; passes never
//!   overlap, and node events during a pass share one pass after it.
//! - With the watch gate, no pass starts within 10 s of the previous one's
//!   start (upstream's rate limit: one pass per 10 s, burst 1); retries and
//!   periodic passes wait for it too.
//! - At most one `create_routes` call per 200 creates in a pass (each
//!   failed create is then retried on its own).
//! - Only routes inside `--cluster-cidr` are created or deleted: a route
//!   outside it is never touched, and a pod CIDR outside it gets no route
//!   (its node gets `NetworkUnavailable=True` and a Warning event), since
//!   the controller could never remove such a route again.
//! - Deleted: routes of this cluster inside `--cluster-cidr` that no node's
//!   pod CIDR matches, blackholes, and routes sending a node's CIDR to
//!   another node (deleted before their replacement is created).
//! - At most 200 cloud calls in flight (upstream's limit); each is retried
//!   a few times within the pass, and a pass with failures is repeated with
//!   backoff (5 s to 300 s, at most the period).
//! - `NetworkUnavailable` is written through `nodes/status` only when it
//!   changes, with a strategic-merge patch of that one condition, so the
//!   kubelet's conditions are never overwritten.
//! - Every cloud mutation goes through the context's fenced cloud.
//! - Each pass counts once, after it, in upstream's
//!   `route_controller_route_sync_total{outcome,trigger}`: `error` only
//!   when the routes could not be listed, `changed` when at least one route
//!   was created or deleted, `noop` otherwise; `node_change` for a pass a
//!   node event ran (or its retry) with the watch gate, `periodic` for
//!   every other pass and, as upstream, every pass without the gate.
//!
//! # Assumptions
//! Nothing runs before the node cache has its first full list: a pass over
//! an empty cache would delete every route.

mod condition;
mod metrics;
mod operations;
mod plan;
mod schedule;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider, Routes};
use ccm_runtime::{Context, Events, Informer, WatchEvent};
use futures::FutureExt;
use futures::future::join_all;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::Api;
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
pub use plan::route_goes_to_node;
use tokio::sync::Notify;

use self::condition::{Conditions, Network, Pending};
use self::metrics::{RouteMetrics, SyncOutcome};
use self::operations::{MAX_IN_FLIGHT, RouteOps};
use self::plan::{Create, NodePlan};
use self::schedule::{PassOutcome, Schedule, Trigger};
use self::watch::NodeWatch;
use crate::Started;
use crate::settings::ControllerSettings;

/// Upstream's event source for this controller.
const EVENT_SOURCE: &str = "route_controller";
/// How long a node event waits for others to share its pass (without the
/// watch gate, which spaces passes 10 s apart instead).
const DEBOUNCE: Duration = Duration::from_millis(200);

struct RouteController {
    cloud: Arc<dyn Routes>,
    cluster_name: String,
    cluster_cidrs: Vec<IpNet>,
    informer: Arc<Informer<Node>>,
    ops: RouteOps,
    conditions: Conditions,
    events: Events,
    metrics: RouteMetrics,
}

/// Why `--cluster-cidr` cannot be used (upstream's checks).
/// Upstream's rules for `--cluster-cidr` when routes are configured: one
/// CIDR, or two of different IP families.
///
/// # Errors
/// A message naming the flag, for the app to print and exit 64.
pub fn check_cluster_cidrs(cidrs: &[IpNet]) -> Result<(), String> {
    match cidrs {
        [] => Err("--cluster-cidr is empty: the route controller needs the pod network to know which routes are its own".into()),
        [_] => Ok(()),
        [a, b] if matches!((a, b), (IpNet::V4(_), IpNet::V6(_)) | (IpNet::V6(_), IpNet::V4(_))) => Ok(()),
        [_, _] => Err("--cluster-cidr has two CIDRs of one IP family; dual-stack needs one of each".into()),
        more => Err(format!("--cluster-cidr has {} CIDRs; at most 2 (one per IP family) are allowed", more.len())),
    }
}

pub(crate) fn start(ctx: &Context, settings: &ControllerSettings) -> Started {
    // Upstream's rule: only --configure-cloud-routes decides (pod CIDRs may
    // be allocated by kube-controller-manager, so --allocate-node-cidrs does
    // not matter).
    if !settings.configure_cloud_routes {
        return Started::Off(
            "will not configure cloud provider routes: --configure-cloud-routes=false".into(),
        );
    }
    if ctx.cloud.routes().is_none() {
        return Started::Off(
            "--configure-cloud-routes is set, but the cloud provider does not support routes"
                .into(),
        );
    }
    if let Err(reason) = check_cluster_cidrs(&settings.cluster_cidrs) {
        return Started::Off(reason);
    }

    let metrics = RouteMetrics::register(&ctx.metrics);
    let trigger = Arc::new(Notify::new());
    let pending = Arc::new(Pending::default());
    let informer = ctx.informers.nodes();
    let hook = {
        let (trigger, pending) = (trigger.clone(), pending.clone());
        let watch = Mutex::new(NodeWatch::default());
        move |event: &WatchEvent<Node>| {
            pending.observe(event);
            if watch.lock().observe(event) {
                trigger.notify_one();
            }
        }
    };
    if let Err(err) = informer.on_event(hook) {
        return Started::Off(err.to_string());
    }

    let cloud: Arc<dyn Routes> = ctx.cloud.clone();
    let controller = RouteController {
        ops: RouteOps::new(cloud.clone(), ctx.cluster_name.clone(), MAX_IN_FLIGHT),
        cloud,
        cluster_name: ctx.cluster_name.clone(),
        cluster_cidrs: settings.cluster_cidrs.clone(),
        informer,
        conditions: Conditions::new(Api::all(ctx.client.clone()), pending),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        metrics,
    };
    let schedule = Schedule {
        trigger,
        debounce: DEBOUNCE,
        period: settings.route_reconciliation_period,
        activity: ctx.metrics.activity(),
        watch_based: settings.watch_based_routes,
    };
    let shutdown = ctx.shutdown.clone();
    Started::Running(
        async move {
            tokio::select! {
                () = controller.run(schedule) => {}
                () = shutdown.cancelled() => {}
            }
        }
        .boxed(),
    )
}

impl RouteController {
    async fn run(&self, schedule: Schedule) {
        self.informer.wait_until_ready().await;
        tracing::info!(cluster_cidrs = ?self.cluster_cidrs, "route controller started");
        schedule.drive(|trigger| self.pass(trigger)).await;
    }

    /// One pass, counted by its outcome and `trigger` once it is done.
    async fn pass(&self, trigger: Trigger) -> PassOutcome {
        let changes = self.ops.changes();
        let (outcome, sync) = match self.reconcile().await {
            Ok(outcome) if self.ops.changes() > changes => (outcome, SyncOutcome::Changed),
            Ok(outcome) => (outcome, SyncOutcome::Noop),
            Err(err) => {
                tracing::warn!(error = %err, "could not list routes");
                (
                    PassOutcome::failed(err.requested_delay()),
                    SyncOutcome::Error,
                )
            }
        };
        self.metrics.record_sync(sync, trigger);
        outcome
    }

    /// Every node and route: creates, deletes and conditions.
    ///
    /// # Errors
    /// The cloud's routes could not be listed, so nothing was done.
    async fn reconcile(&self) -> Result<PassOutcome, CloudError> {
        let nodes = self.informer.store().state();
        let routes = self.cloud.list_routes(&self.cluster_name).await?;
        let plan = plan::plan(&nodes, &routes, &self.cluster_cidrs);
        tracing::debug!(
            nodes = nodes.len(),
            routes = routes.len(),
            creates = plan.nodes.iter().map(|n| n.creates.len()).sum::<usize>(),
            deletes = plan.orphans.len(),
            "route pass"
        );
        let deletes = join_all(plan.orphans.iter().map(|route| async move {
            self.ops.delete(route).await.map_or_else(
                |err| PassOutcome::failed(err.requested_delay()),
                |()| PassOutcome::default(),
            )
        }));
        let creates: Vec<&Create> = plan.nodes.iter().flat_map(|n| &n.creates).collect();
        let start = tokio::time::Instant::now();
        let (deleted, created) =
            futures::future::join(deletes, self.ops.create_all(&creates)).await;
        let mut created = created.into_iter();
        let converged = join_all(plan.nodes.iter().map(|node| {
            let results: Vec<_> = created.by_ref().take(node.creates.len()).collect();
            self.converge(node, results, start.elapsed())
        }))
        .await;
        let missing = converged.iter().filter(|(_, missing)| *missing).count();
        self.metrics.set_missing(missing);
        Ok(deleted
            .into_iter()
            .chain(converged.into_iter().map(|(outcome, _)| outcome))
            .fold(PassOutcome::default(), PassOutcome::and))
    }

    /// Reports one node's failed creates (`results`, one per planned
    /// create, after `elapsed`), then sets its condition; says whether the
    /// node is left without all its routes.
    async fn converge(
        &self,
        plan: &NodePlan,
        results: Vec<Result<(), CloudError>>,
        elapsed: Duration,
    ) -> (PassOutcome, bool) {
        let node = &plan.node;
        let reference = node.object_ref(&());
        let mut outcome = PassOutcome::default();
        for (create, result) in plan.creates.iter().zip(results) {
            let Err(err) = result else { continue };
            outcome = outcome.and(PassOutcome::failed(err.requested_delay()));
            let note = format!(
                "Could not create route {} {} for node {} after {elapsed:?}: {err}",
                create.name_hint,
                create.route.destination_cidr,
                node.name_any(),
            );
            self.events
                .warning(&reference, "FailedToCreateRoute", note)
                .await;
        }
        let missing = outcome.failures > 0 || !plan.unmanaged.is_empty();
        let state = if missing {
            Network::NoRouteCreated
        } else {
            Network::RouteCreated
        };
        match self.conditions.ensure(node, state).await {
            Ok(true) if !plan.unmanaged.is_empty() => {
                self.report_unmanaged(&reference, node, &plan.unmanaged)
                    .await;
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(node = %node.name_any(), error = %err, "could not update the NetworkUnavailable condition");
                outcome = outcome.and(PassOutcome::failed(None));
            }
        }
        (outcome, missing)
    }

    /// Explains, once per condition change, why a pod CIDR has no route.
    async fn report_unmanaged(&self, reference: &ObjectReference, node: &Node, cidrs: &[IpNet]) {
        let cidrs: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
        let cluster: Vec<String> = self.cluster_cidrs.iter().map(ToString::to_string).collect();
        let note = format!(
            "pod CIDR {} of node {} is outside --cluster-cidr {}: no route is created for it, since routes outside the cluster CIDR are never managed",
            cidrs.join(","),
            node.name_any(),
            cluster.join(",")
        );
        tracing::warn!(node = %node.name_any(), "{note}");
        self.events
            .warning(reference, "FailedToCreateRoute", note)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(cidrs: &[&str]) -> Vec<IpNet> {
        cidrs.iter().map(|c| c.parse().unwrap()).collect()
    }

    #[test]
    fn cluster_cidrs_follow_upstreams_rules() {
        assert!(check_cluster_cidrs(&nets(&["10.244.0.0/16"])).is_ok());
        assert!(check_cluster_cidrs(&nets(&["10.244.0.0/16", "fd00::/56"])).is_ok());
        assert!(check_cluster_cidrs(&[]).unwrap_err().contains("empty"));
        assert!(
            check_cluster_cidrs(&nets(&["10.244.0.0/16", "10.245.0.0/16"]))
                .unwrap_err()
                .contains("one of each")
        );
        assert!(
            check_cluster_cidrs(&nets(&["10.1.0.0/16", "fd00::/56", "10.2.0.0/16"]))
                .unwrap_err()
                .contains("at most 2")
        );
    }
}
