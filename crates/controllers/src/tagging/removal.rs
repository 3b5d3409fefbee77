//! Untagging the instances of deleted nodes: the informer's delete hook
//! hands each node here, and its untag joins the next batch call.
//!
//! A failed untag is retried after the provider's delay or a backoff of
//! 5 s doubling to 300 s, at most [`MAX_RETRIES`](super::MAX_RETRIES) times;
//! while one is pending the process's `Activity` counts it as running.

use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{RateLimiter, TagOutcome};
use ccm_runtime::{Activity, Batcher, Busy};
use kube::ResourceExt;
use tokio::sync::mpsc;

use super::MAX_RETRIES;
use crate::provider_shared::{RETRIES_EXHAUSTED, TOTAL_ERRORS, WorkItemErrors};

/// The first retry's delay; doubled for each further one.
const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest delay between retries.
const MAX_RETRY: Duration = Duration::from_secs(300);

/// Where deleted nodes go; cheap to call from the informer's hook.
pub(super) struct Removals {
    tx: mpsc::UnboundedSender<(String, String, Busy)>,
    activity: Activity,
}

impl Removals {
    /// Starts the task that untags deleted nodes' instances.
    pub(super) fn spawn(
        untag: Batcher<TagOutcome, String>,
        rate: Option<Arc<RateLimiter>>,
        errors: WorkItemErrors,
        activity: Activity,
    ) -> Arc<Self> {
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, String, Busy)>();
        tokio::spawn(async move {
            // Each guard is held from the hook's push until the untag settles.
            while let Some((name, provider_id, busy)) = rx.recv().await {
                let untag = untag.clone();
                let rate = rate.clone();
                let errors = errors.clone();
                tokio::spawn(async move {
                    remove(&untag, rate.as_ref(), &errors, &name, &provider_id).await;
                    drop(busy);
                });
            }
        });
        Arc::new(Self { tx, activity })
    }

    /// Queues the untag of `node`'s instance, if it has a provider ID.
    pub(super) fn push(&self, node: &Node) {
        let Some(provider_id) = ccm_cloud_provider::provider_id(node).map(str::to_owned) else {
            return;
        };
        let _ = self
            .tx
            .send((node.name_any(), provider_id, self.activity.busy()));
    }
}

async fn remove(
    untag: &Batcher<TagOutcome, String>,
    rate: Option<&Arc<RateLimiter>>,
    errors: &WorkItemErrors,
    name: &str,
    provider_id: &str,
) {
    let mut delay = FIRST_RETRY;
    for attempt in 0..=MAX_RETRIES {
        if let Some(rate) = rate {
            rate.acquire().await;
        }
        match untag.lookup(provider_id.to_owned()).await {
            Ok(TagOutcome::Done | TagOutcome::NotFound) => {
                tracing::info!(node = name, provider_id, "instance untagged");
                return;
            }
            Ok(TagOutcome::NotTaggable(reason)) => {
                tracing::debug!(node = name, %reason, "not untagged");
                return;
            }
            Err(err) if attempt < MAX_RETRIES => {
                errors.record(TOTAL_ERRORS, provider_id);
                let wait = err.requested_delay().unwrap_or(delay);
                tracing::warn!(node = name, provider_id, error = %err, ?wait, "untagging failed; retrying");
                tokio::time::sleep(wait).await;
                delay = (delay * 2).min(MAX_RETRY);
            }
            Err(err) => {
                errors.record(RETRIES_EXHAUSTED, provider_id);
                tracing::error!(node = name, provider_id, error = %err, "untagging failed {MAX_RETRIES} times; giving up");
            }
        }
    }
}
