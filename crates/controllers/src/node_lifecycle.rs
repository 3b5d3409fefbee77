//! The cloud-node-lifecycle controller: every `--node-monitor-period`, checks
//! nodes that are not Ready against the cloud.
//!
//! # Guarantees
//! - A node whose instance no longer exists is deleted — but never on an
//!   ambiguous answer (an error), and never a node created within the grace
//!   period that has never been seen Ready (new instances can take a while
//!   to appear in a cloud's API; upstream users lost such nodes).
//! - A node whose instance is shut down gets the
//!   `node.cloudprovider.kubernetes.io/shutdown:NoSchedule` taint; it is
//!   removed when the node is Ready again or its instance runs.
//! - Existence and shutdown checks are batched: N not-Ready nodes cost
//!   ceil(N / batch) calls of each kind; Ready nodes cost none.
//! - Every pass, with or without cloud calls, is observed once it ends in
//!   upstream's `cloud_node_lifecycle_controller_monitor_nodes_duration_seconds`.
//! - Every node's answer counts once in upstream's
//!   `cloud_node_lifecycle_controller_cloud_provider_calls_total{operation,result}`
//!   (`instance_exists`, `instance_shutdown`; an instance that does not
//!   exist is `instance_not_found`, a call cut short by the controller
//!   stopping is `canceled`): per node, as upstream, though the calls are
//!   batched.

mod metrics;

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::Arc;

use ccm_cloud_provider::CloudProvider;
use ccm_runtime::{Activity, BatchCall, Context, Events, Informer, WatchEvent, lookup_all};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
use tokio::time::MissedTickBehavior;

use self::metrics::{LifecycleMetrics, Operation};
use crate::settings::ControllerSettings;
use crate::taints::{self, SHUTDOWN};
use crate::writes::{self, NodeChange};
use crate::{Started, calls};

const EVENT_SOURCE: &str = "cloud-node-lifecycle-controller";

/// Node UIDs seen Ready at least once by this process.
type SeenReady = Arc<Mutex<HashSet<String>>>;

struct Lifecycle {
    api: Api<Node>,
    /// For the leadership check just before a node is deleted.
    cloud: Arc<ccm_runtime::MeteredCloud>,
    informer: Arc<Informer<Node>>,
    exist: BatchCall<bool>,
    shutdown: BatchCall<bool>,
    max_batch: NonZeroUsize,
    events: Events,
    seen_ready: SeenReady,
    grace: std::time::Duration,
    activity: Activity,
    metrics: LifecycleMetrics,
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn age(node: &Node) -> Option<std::time::Duration> {
    let created = node.metadata.creation_timestamp.as_ref()?;
    jiff::Timestamp::now()
        .duration_since(created.0)
        .try_into()
        .ok()
}

pub(crate) fn start(ctx: &Context, settings: &ControllerSettings) -> Started {
    let Some(instances) = ctx.cloud.instances() else {
        return Started::Off("the cloud provider has no instances capability".into());
    };
    let informer = ctx.informers.nodes();
    let seen_ready = SeenReady::default();
    let hook = {
        let seen_ready = seen_ready.clone();
        move |event: &WatchEvent<Node>| {
            let mut seen = seen_ready.lock();
            match event {
                WatchEvent::Apply(node) | WatchEvent::InitApply(node) if is_ready(node) => {
                    seen.insert(node.uid().unwrap_or_default());
                }
                WatchEvent::Delete(node) => {
                    seen.remove(&node.uid().unwrap_or_default());
                }
                _ => {}
            }
        }
    };
    if let Err(err) = informer.on_event(hook) {
        return Started::Off(err.to_string());
    }
    let metrics = LifecycleMetrics::register(&ctx.metrics);
    let lifecycle = Lifecycle {
        api: Api::all(ctx.client.clone()),
        cloud: ctx.cloud.clone(),
        informer,
        exist: metrics.counted(Operation::InstanceExists, calls::exist(ctx)),
        shutdown: metrics.counted(Operation::InstanceShutdown, calls::shutdown(ctx)),
        max_batch: instances.max_batch_size(),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        seen_ready,
        grace: settings.new_node_grace,
        activity: ctx.metrics.activity(),
        metrics,
    };
    let period = settings.node_monitor_period;
    let stop = ctx.shutdown.clone();
    Started::Running(
        async move {
            tokio::select! {
                () = lifecycle.run(period) => {}
                () = stop.cancelled() => {}
            }
        }
        .boxed(),
    )
}

impl Lifecycle {
    async fn run(self, period: std::time::Duration) {
        self.informer.wait_until_ready().await;
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let _pass = self.activity.busy();
            let start = tokio::time::Instant::now();
            self.monitor().await;
            self.metrics.observe_pass(start.elapsed());
        }
    }

    /// One pass over every node.
    async fn monitor(&self) {
        let (ready, not_ready): (Vec<_>, Vec<_>) = self
            .informer
            .store()
            .state()
            .into_iter()
            .partition(|n| is_ready(n));
        for node in ready.iter().filter(|n| taints::has(n, SHUTDOWN)) {
            self.set_shutdown_taint(node, false).await;
        }
        if not_ready.is_empty() {
            return;
        }
        let one_call = NonZeroUsize::MIN;
        let mut existing = Vec::new();
        for (node, exists) in lookup_all(not_ready, &self.exist, self.max_batch, one_call).await {
            match exists {
                Ok(true) => existing.push(node),
                Ok(false) => self.delete_if_safe(&node).await,
                Err(err) => {
                    tracing::warn!(node = %node.name_any(), error = %err, "existence unknown; leaving the node alone");
                }
            }
        }
        if existing.is_empty() {
            return;
        }
        for (node, shutdown) in lookup_all(existing, &self.shutdown, self.max_batch, one_call).await
        {
            match shutdown {
                Ok(shutdown) if shutdown != taints::has(&node, SHUTDOWN) => {
                    self.set_shutdown_taint(&node, shutdown).await;
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(node = %node.name_any(), error = %err, "shutdown state unknown");
                }
            }
        }
    }

    async fn delete_if_safe(&self, node: &Node) {
        let name = node.name_any();
        let uid = node.uid().unwrap_or_default();
        let seen_ready = self.seen_ready.lock().contains(&uid);
        if !seen_ready && age(node).is_none_or(|age| age < self.grace) {
            tracing::info!(node = %name, "instance not found, but the node is new and has never been Ready: not deleting it yet");
            return;
        }
        let reference = node.object_ref(&());
        self.events
            .normal(
                &reference,
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        // Fenced at the moment it leaves: the instance checks above took
        // time, and a process that no longer leads must not delete.
        if let Err(err) = self.cloud.check_leadership() {
            tracing::info!(node = %name, "not deleting: {err}");
            return;
        }
        match self.api.delete(&name, &params).await {
            Ok(_) => tracing::info!(node = %name, "deleted: its instance no longer exists"),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                tracing::debug!(node = %name, "already gone or replaced");
            }
            Err(err) => {
                self.events
                    .warning(
                        &reference,
                        "DeletingNodeFailed",
                        format!("Failed deleting node {name}: {err}"),
                    )
                    .await;
            }
        }
    }

    async fn set_shutdown_taint(&self, node: &Node, present: bool) {
        let result = writes::patch_node(&self.api, node, |current| {
            if taints::has(current, SHUTDOWN) == present {
                return None;
            }
            let mut taints = taints::without(current, SHUTDOWN);
            if present {
                taints.push(taints::shutdown());
            }
            Some(NodeChange {
                taints: Some(taints),
                ..NodeChange::default()
            })
        })
        .await;
        match result {
            Ok(Some(_)) => {
                tracing::info!(node = %node.name_any(), present, "shutdown taint updated");
            }
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(node = %node.name_any(), error = %err, "could not update the shutdown taint");
            }
        }
    }
}
