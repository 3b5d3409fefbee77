//! A provider's instance-tagging controller (cloud-provider-aws's
//! `tagging`): `--tags` on the instance of every node that has a provider
//! ID, and off it when the node is deleted.
//!
//! # Guarantees
//! - Nodes that join together are tagged together: N nodes cost
//!   ceil(N / batch) tag calls (AWS: 1,000 instances a `CreateTags`), and
//!   deleted nodes likewise share untag calls.
//! - A tagged node carries the provider's label (upstream's
//!   `k8s.io/cloud-provider-aws`) whose value is upstream's checksum of the
//!   tags: a node whose label matches costs no call, after a restart too,
//!   and changing `--tags` tags every instance again.
//! - A node without a provider ID waits for one; a provider ID the provider
//!   cannot tag (Fargate, another cloud's) is left alone.
//! - An instance not found is retried while its node is younger than five
//!   minutes (AWS's eventual consistency), then left alone; untagging an
//!   instance that is gone is done.
//! - Failures are retried with the framework's backoff, or the provider's
//!   exact delay when throttled, at most [`MAX_RETRIES`] times per node as
//!   upstream, each counted in `<prefix>_tagging_controller_work_item_errors_total`.

mod checksum;
mod removal;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{
    CloudError, CloudProvider, InstanceTags, ProviderController, RateLimiter, TagOutcome,
};
use ccm_runtime::controller::Triggers;
use ccm_runtime::{Action, BatchCall, Batcher, Context, ReconcileError, WatchEvent};
use futures::FutureExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::Started;
use crate::provider_shared::{ProviderControllerSettings, RetryBudget, WorkItemErrors};

/// How long the first node of a burst waits for others to share its call.
const BATCH_WINDOW: Duration = Duration::from_millis(100);
pub(crate) use crate::provider_shared::MAX_RETRIES;
/// Upstream's grace for `CreateTags` to see a new instance.
const NEW_NODE_GRACE: Duration = Duration::from_secs(300);

/// `tag_instances` or `untag_instances` as a batcher takes them.
type TagBatcher = Batcher<TagOutcome, String>;

struct Tagging {
    api: Api<Node>,
    batcher: TagBatcher,
    label: &'static str,
    checksum: String,
    rate: Option<Arc<RateLimiter>>,
    retries: RetryBudget,
    initial_delay: Histogram,
}

pub(crate) fn start(
    spec: &ProviderController,
    ctx: &Context,
    settings: &ProviderControllerSettings,
) -> Started {
    let Some(tags) = ctx.cloud.instance_tags() else {
        return Started::Off("the cloud provider cannot tag instances".into());
    };
    if settings.tags.is_empty() {
        return Started::Off("--tags is empty".into());
    }
    let max_batch = tags.max_batch_size();
    let label = tags.tagged_label();
    let errors = WorkItemErrors::register(&ctx.metrics, spec.metrics_prefix, "tagging");
    let initial_delay = Histogram::new(exponential_buckets(1.0, 4.0, 6));
    ctx.metrics.register(|registry| {
        registry.register(
            // Upstream's name, its misspelling included.
            "tagging_controller_inital_node_tagging_delay_seconds",
            "Latency (in seconds) between node creation and its first successful tagging by TaggingController.",
            initial_delay.clone(),
        );
    });
    let rate = settings
        .tagging_rate
        .and_then(|r| RateLimiter::new(r.qps, r.burst).ok())
        .map(Arc::new);
    let untag = batcher(ctx, &settings.tags, max_batch, false);
    let state = Arc::new(Tagging {
        api: Api::all(ctx.client.clone()),
        batcher: batcher(ctx, &settings.tags, max_batch, true),
        label,
        checksum: checksum::of(&settings.tags),
        rate: rate.clone(),
        retries: RetryBudget::new(errors.clone()),
        initial_delay,
    });
    let informer = ctx.informers.nodes();
    let removals = removal::Removals::spawn(untag, rate, errors, ctx.metrics.activity());
    if let Err(err) = informer.on_event(move |event| {
        if let WatchEvent::Delete(node) = event {
            removals.push(node);
        }
    }) {
        return Started::Off(err.to_string());
    }
    crate::run_controller(
        spec.name,
        &informer,
        Triggers::default(),
        ctx,
        move |node| state.clone().reconcile(node),
    )
}

/// One call at a time: nodes queued meanwhile fill the next batch.
fn batcher(
    ctx: &Context,
    tags: &BTreeMap<String, String>,
    max_batch: NonZeroUsize,
    tag: bool,
) -> TagBatcher {
    let cloud = ctx.cloud.clone();
    let tags = Arc::new(tags.clone());
    let call: BatchCall<TagOutcome, String> = Arc::new(move |ids| {
        let cloud = cloud.clone();
        let tags = tags.clone();
        async move {
            if tag {
                cloud.tag_instances(&ids, &tags).await
            } else {
                cloud.untag_instances(&ids, &tags).await
            }
        }
        .boxed()
    });
    Batcher::spawn(call, max_batch, BATCH_WINDOW, NonZeroUsize::MIN)
}

impl Tagging {
    async fn reconcile(self: Arc<Self>, node: Arc<Node>) -> Result<Action, ReconcileError> {
        if node.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let labels = node.metadata.labels.as_ref();
        let current = labels.and_then(|l| l.get(self.label));
        if current == Some(&self.checksum) {
            return Ok(Action::await_change());
        }
        let Some(provider_id) = ccm_cloud_provider::provider_id(&node) else {
            // The cloud-node controller sets it; that change brings the node back.
            return Ok(Action::await_change());
        };
        let result = self.tag(&node, provider_id, current.is_none()).await;
        self.retries
            .settle(&node, provider_id, result, "tagging failed")
    }

    async fn tag(
        &self,
        node: &Node,
        provider_id: &str,
        first: bool,
    ) -> Result<Action, ReconcileError> {
        let name = node.name_any();
        if let Some(rate) = &self.rate {
            rate.acquire().await;
        }
        match self.batcher.lookup(provider_id.to_owned()).await? {
            TagOutcome::Done => {}
            TagOutcome::NotTaggable(reason) => {
                tracing::debug!(node = %name, %reason, "not tagged");
                return Ok(Action::await_change());
            }
            TagOutcome::NotFound => {
                let age = node_age(node);
                if age.is_some_and(|a| a < NEW_NODE_GRACE) {
                    return Err(CloudError::msg(format!(
                        "the instance of node {name} ({provider_id}) is not found yet; the node is new"
                    ))
                    .into());
                }
                tracing::info!(node = %name, %provider_id, "not tagged: its instance does not exist");
                return Ok(Action::await_change());
            }
        }
        let patch = serde_json::json!({
            "metadata": { "labels": { self.label: self.checksum } }
        });
        self.api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(node = %name, %provider_id, "instance tagged");
        if first && let Some(age) = node_age(node) {
            self.initial_delay.observe(age.as_secs_f64());
        }
        Ok(Action::await_change())
    }
}

/// How long ago the node was created.
fn node_age(node: &Node) -> Option<Duration> {
    let created = node.metadata.creation_timestamp.as_ref()?.0;
    let age = jiff::Timestamp::now().duration_since(created);
    Duration::try_from(age).ok()
}
