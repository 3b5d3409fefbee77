//! The cloud-node controller: initializes nodes that carry the
//! `node.cloudprovider.kubernetes.io/uninitialized` taint from their
//! instance's metadata, and keeps addresses and labels current.
//!
//! # Guarantees
//! - Instance lookups are batched: a burst of N new nodes costs
//!   ceil(N / batch) metadata calls; so does each periodic refresh.
//! - Initializing a node takes at most one write to `nodes/status` (its
//!   addresses, first) and one write to the Node (provider ID, labels, and
//!   the taint's removal, last), so the taint is only removed once the node
//!   has its addresses.
//! - The taint is removed with a resourceVersion precondition: a taint
//!   another writer changed meanwhile is never undone.
//! - A different non-empty provider ID is never overwritten; a kubelet node
//!   IP that matches no cloud address, or an instance the cloud does not
//!   know, keeps the taint and is retried with backoff; each gets a Warning
//!   event.
//! - No event on success, so initialization stays within two writes.
//! - A node without the taint costs no queue work: only tainted nodes (and
//!   those with a write of ours still to be seen) are queued.

mod addresses;
mod labels;
mod refresh;
mod uninitialized;

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider, InstanceMetadata};
use ccm_runtime::controller::{self, ControllerConfig, Triggers};
use ccm_runtime::{Action, Batcher, Context, Events, ReconcileError};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::Semaphore;

use crate::calls;
use crate::settings::ControllerSettings;
use crate::taints::{self, UNINITIALIZED};
use crate::writes::{self, NodeChange};
use crate::{ControllerId, Started};

/// How long the first lookup of a burst waits for others to share its call.
const BATCH_WINDOW: Duration = Duration::from_millis(100);
/// Upstream's component name for this controller's events.
const EVENT_SOURCE: &str = "cloud-node-controller";
/// How many nodes' initializations write at once. A burst's writes wait on
/// the client's rate limit anyway (20 a second by default), and 32 at once
/// outrun a limit of 1,000 a second on a loopback API server; each write
/// keeps several KiB of request state while it waits, a node waiting for a
/// slot only its lookup's answer.
const WRITES_AT_ONCE: usize = 32;

struct NodeController {
    api: Api<Node>,
    batcher: Batcher<InstanceMetadata>,
    events: Events,
    taint_removal_delay: Histogram,
    /// Node UID → the resourceVersion of this controller's last write of
    /// an initialization (the final patch, else the status write). The
    /// watch and the queue can still hand over a copy from before it (still
    /// tainted): reconciling that copy would look the node up again and
    /// write with a stale version, only to be refused and re-read, so a
    /// copy no newer than the write is skipped.
    superseded: Mutex<HashMap<String, String>>,
    /// [`WRITES_AT_ONCE`] slots for the write phase.
    writes: Semaphore,
}

pub(crate) fn start(ctx: &Context, settings: &ControllerSettings) -> Started {
    let Some(instances) = ctx.cloud.instances() else {
        return Started::Off("the cloud provider has no instances capability".into());
    };
    let max_batch = instances.max_batch_size();
    let concurrency =
        NonZeroUsize::new(settings.concurrent_node_syncs.into()).unwrap_or(NonZeroUsize::MIN);
    let taint_removal_delay = Histogram::new(exponential_buckets(0.25, 2.0, 14));
    let refresh_counts = refresh::RefreshCounts::default();
    ctx.metrics.register(|registry| {
        registry.register(
            "node_controller_cloud_provider_taint_removal_delay_seconds",
            "Seconds from node creation until the cloud-node controller removed its uninitialized taint",
            taint_removal_delay.clone(),
        );
        registry.register(
            "ccm_node_refresh_cloud_calls",
            "Metadata calls of the cloud-node controller's periodic refresh of initialized nodes; the other instances_metadata calls initialize nodes",
            refresh_counts.calls.clone(),
        );
        registry.register(
            "ccm_node_refresh_nodes",
            "Initialized nodes the cloud-node controller's periodic refresh looked up",
            refresh_counts.nodes.clone(),
        );
        registry.register_collector(Box::new(uninitialized::Uninitialized {
            nodes: ctx.informers.nodes().store(),
        }));
    });
    let state = Arc::new(NodeController {
        api: Api::all(ctx.client.clone()),
        batcher: Batcher::spawn(calls::metadata(ctx), max_batch, BATCH_WINDOW, concurrency),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        taint_removal_delay,
        superseded: Mutex::default(),
        writes: Semaphore::new(WRITES_AT_ONCE),
    });
    let informer = ctx.informers.nodes();
    let config = ControllerConfig {
        name: ControllerId::CloudNode.name(),
        concurrency: 0,
    };
    // Initialized nodes, most nodes most of the time, never enter the
    // queue: their reconcile would do nothing (but forget a superseded
    // write, so a node with one still does). Heartbeats then cost no queue
    // work, and a restart amid thousands of initialized nodes leaves no
    // scheduler table sized for them all.
    let relevant = {
        let state = state.clone();
        move |node: &Node| {
            taints::has(node, UNINITIALIZED)
                || node
                    .metadata
                    .uid
                    .as_ref()
                    .is_some_and(|uid| state.superseded.lock().contains_key(uid))
        }
    };
    let reconciles = match controller::run_where(
        config,
        &informer,
        Triggers::default(),
        ctx.metrics.clone(),
        ctx.shutdown.clone(),
        relevant,
        move |node| state.clone().reconcile(node),
    ) {
        Ok(future) => future,
        Err(err) => return Started::Off(err.to_string()),
    };
    let refresh = refresh::Refresh {
        api: Api::all(ctx.client.clone()),
        informer: informer.clone(),
        call: calls::metadata(ctx),
        max_batch,
        concurrency,
        period: settings.node_status_update_frequency,
        activity: ctx.metrics.activity(),
        counts: refresh_counts,
    };
    let shutdown = ctx.shutdown.clone();
    Started::Running(
        async move {
            tokio::select! {
                () = reconciles => {}
                () = refresh.run() => {}
                () = shutdown.cancelled() => {}
            }
        }
        .boxed(),
    )
}

impl NodeController {
    /// A burst's reconciles all wait here at once, on the batched lookup and
    /// then for a write slot, so this future stays small: everything after
    /// the lookup is [`Self::initialize`], boxed and only once a slot is
    /// free.
    async fn reconcile(self: Arc<Self>, node: Arc<Node>) -> Result<Action, ReconcileError> {
        let uid = node.uid().unwrap_or_default();
        if !taints::has(&node, UNINITIALIZED) {
            self.superseded.lock().remove(&uid);
            return Ok(Action::await_change());
        }
        let superseded = self.superseded.lock().get(&uid).cloned();
        if superseded
            .is_some_and(|written| not_newer(node.metadata.resource_version.as_deref(), &written))
        {
            return Ok(Action::await_change());
        }
        let looked_up = self.batcher.lookup(node.clone()).await;
        // The semaphore is never closed; were it, the write would go ahead.
        let _slot = self.writes.acquire().await.ok();
        Box::pin(self.initialize(node, uid, looked_up)).await
    }

    /// Initializes `node` from what the cloud answered for it: its
    /// addresses, then its provider ID and labels with the taint's removal.
    async fn initialize(
        &self,
        node: Arc<Node>,
        uid: String,
        looked_up: Result<InstanceMetadata, CloudError>,
    ) -> Result<Action, ReconcileError> {
        let reference = node.object_ref(&());
        let metadata = match looked_up {
            Ok(metadata) => metadata,
            Err(CloudError::InstanceNotFound) => {
                let note = format!(
                    "the cloud has no instance for node {}; it stays uninitialized",
                    node.name_any()
                );
                self.events
                    .warning(&reference, "InstanceNotFound", note)
                    .await;
                return Err(CloudError::InstanceNotFound.into());
            }
            Err(err) => return Err(err.into()),
        };

        let current_id = ccm_cloud_provider::provider_id(&node).unwrap_or_default();
        if !current_id.is_empty()
            && !metadata.provider_id.is_empty()
            && current_id != metadata.provider_id
        {
            let note = format!(
                "spec.providerID is {current_id:?} but the cloud says {:?}; it is never overwritten, so the node stays uninitialized",
                metadata.provider_id
            );
            self.events
                .warning(&reference, "ProviderIDMismatch", note.clone())
                .await;
            return Err(ReconcileError::Invalid(note));
        }

        let desired = match addresses::desired(&node, &metadata.node_addresses) {
            Ok(desired) => desired,
            Err(err) => {
                self.events
                    .warning(
                        &reference,
                        "NodeAddressesInvalid",
                        format!("{err}; the node stays uninitialized"),
                    )
                    .await;
                return Err(ReconcileError::NotReady(err.to_string()));
            }
        };

        let name = node.name_any();
        let mut base = (*node).clone();
        if let Some(desired) = desired.filter(|d| d.as_slice() != addresses::current(&node)) {
            base = writes::set_addresses(&self.api, &name, &desired).await?;
        }
        let status_version = base
            .metadata
            .resource_version
            .clone()
            .filter(|_| base.metadata.resource_version != node.metadata.resource_version);
        let initialized = writes::patch_node(&self.api, &base, |current| {
            if !taints::has(current, UNINITIALIZED) {
                return None;
            }
            let id_unset = ccm_cloud_provider::provider_id(current).is_none();
            Some(NodeChange {
                labels: labels::changes(current, &metadata),
                provider_id: (id_unset && !metadata.provider_id.is_empty())
                    .then(|| metadata.provider_id.clone()),
                taints: Some(taints::without(current, UNINITIALIZED)),
            })
        })
        .await?;
        if let Some(initialized) = &initialized {
            let written = initialized.metadata.resource_version.clone();
            if let Some(version) = written.or(status_version) {
                self.superseded.lock().insert(uid, version);
            }
            if let Some(created) = &node.metadata.creation_timestamp {
                let delay = jiff::Timestamp::now()
                    .duration_since(created.0)
                    .as_secs_f64()
                    .max(0.0);
                self.taint_removal_delay.observe(delay);
            }
            tracing::info!(node = %name, provider_id = %metadata.provider_id, "initialized");
        }
        Ok(Action::await_change())
    }
}

/// Whether a copy at resourceVersion `seen` is no newer than `written`.
/// The API server's versions are etcd revisions, which only grow; a version
/// that is not a number is compared for equality alone.
fn not_newer(seen: Option<&str>, written: &str) -> bool {
    match (seen.map(str::parse::<u64>), written.parse::<u64>()) {
        (Some(Ok(seen)), Ok(written)) => seen <= written,
        _ => seen == Some(written),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::num::NonZeroUsize;
    use std::sync::Arc;
    use std::time::Duration;

    use ccm_runtime::{Batcher, Events};
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::Node;
    use kube::api::Api;
    use prometheus_client::metrics::histogram::Histogram;

    use super::{NodeController, not_newer};

    /// In a burst every new node's reconcile waits at once, most of them on
    /// the batched lookup or a write slot; the reconcile future (what each
    /// of those waits keeps allocated) must not carry the writes' state.
    #[tokio::test]
    async fn a_waiting_reconcile_is_small() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        let controller = Arc::new(NodeController {
            api: Api::all(client.clone()),
            batcher: Batcher::spawn(
                Arc::new(|_| futures::future::pending().boxed()),
                NonZeroUsize::MIN,
                Duration::from_millis(1),
                NonZeroUsize::MIN,
            ),
            events: Events::new(client, "test", None),
            taint_removal_delay: Histogram::new([1.0].into_iter()),
            superseded: parking_lot::Mutex::new(HashMap::new()),
            writes: tokio::sync::Semaphore::new(1),
        });
        let reconcile = controller.reconcile(Arc::new(Node::default()));
        let size = size_of_val(&reconcile);
        assert!(size <= 1024, "a waiting reconcile keeps {size} bytes");
    }

    #[test]
    fn a_copy_is_stale_when_its_version_is_not_past_the_write() {
        assert!(not_newer(Some("41"), "42"));
        assert!(not_newer(Some("42"), "42"));
        assert!(!not_newer(Some("43"), "42"));
        assert!(!not_newer(None, "42"));
        assert!(not_newer(Some("opaque-7"), "opaque-7"));
        assert!(!not_newer(Some("opaque-6"), "opaque-7"));
    }
}
