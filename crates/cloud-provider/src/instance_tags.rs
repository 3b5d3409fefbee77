//! Tags on the instances behind nodes, for cost allocation and ownership
//! (cloud-provider-aws's `tagging` controller).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use async_trait::async_trait;

use crate::BatchResult;

/// What became of one instance in a tag or untag call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagOutcome {
    /// The instance carries the tags (or, for an untag, no longer does).
    Done,
    /// The cloud has no such instance (yet, or any more).
    NotFound,
    /// The provider ID names nothing this capability tags (another cloud's,
    /// a serverless node such as Fargate, a malformed ID): never retried.
    NotTaggable(String),
}

/// Puts tags on instances and takes them off, many instances a call.
///
/// # Contract for implementers
/// - Both calls take at most [`InstanceTags::max_batch_size`] provider IDs
///   and answer one [`TagOutcome`] per ID, in input order; `Err` when the
///   call failed as a whole (every ID is retried).
/// - Both are idempotent: tagging a tagged instance, or untagging an
///   untagged one, is `Done`. Untagging removes exactly the given keys
///   (with their values) and no other tag.
/// - An unknown instance must not cost the others their answer.
#[async_trait]
pub trait InstanceTags: Send + Sync {
    /// The most provider IDs one call takes.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::MIN
    }

    /// The node label whose value records which tags a node's instance
    /// carries (upstream's `k8s.io/cloud-provider-aws`), so a restart does
    /// not tag every instance again.
    fn tagged_label(&self) -> &'static str;

    /// Puts `tags` on the instances behind `provider_ids`.
    async fn tag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome>;

    /// Removes `tags` from the instances behind `provider_ids`.
    async fn untag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome>;
}
