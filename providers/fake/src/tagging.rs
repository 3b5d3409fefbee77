//! The capabilities behind a provider's own controllers, offered once a
//! test asks ([`FakeCloud::offer_instance_tags`],
//! [`FakeCloud::offer_pod_cidrs`]): tags on instances, and the pod-CIDR
//! prefix the cloud delegated to each. Both answer by provider ID, for the
//! instances the fake holds; a serverless node's ID
//! ([`FakeCloud::mark_serverless`]) is neither tagged nor given a prefix.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use async_trait::async_trait;
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::{BatchResult, InstanceTags, PodCidr, PodCidrs, TagOutcome};

use crate::load_balancer::describe;
use crate::{Capability, FakeCloud, Operation};

impl FakeCloud {
    /// Offers instance tagging, recording each tagged node under `label`.
    pub fn offer_instance_tags(&self, label: &'static str) {
        self.inner.knobs.lock().tagged_label = label;
        self.set_capability(Capability::InstanceTags, true);
    }

    /// Offers the pod-CIDR prefixes set with [`FakeCloud::set_pod_prefix`].
    pub fn offer_pod_cidrs(&self) {
        self.set_capability(Capability::PodCidrs, true);
    }

    /// The tags the instance `provider_id` carries now.
    pub fn instance_tags(&self, provider_id: &str) -> BTreeMap<String, String> {
        self.state()
            .tags
            .get(provider_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Puts `tags` on the instance `provider_id`, as another tool would.
    pub fn set_instance_tags(&self, provider_id: &str, tags: BTreeMap<String, String>) {
        self.state().tags.insert(provider_id.to_owned(), tags);
    }

    /// Delegates `prefix` to the instance `provider_id`.
    pub fn set_pod_prefix(&self, provider_id: &str, prefix: IpNet) {
        self.state().prefixes.insert(provider_id.to_owned(), prefix);
    }

    /// Makes `provider_id` a serverless node's (a Fargate pod's): never
    /// tagged, no prefix, for the reason `why`.
    pub fn mark_serverless(&self, provider_id: &str, why: &str) {
        self.state()
            .serverless
            .insert(provider_id.to_owned(), why.to_owned());
    }

    fn id_batch(&self) -> NonZeroUsize {
        NonZeroUsize::new(self.settings().batch_size).unwrap_or(NonZeroUsize::MIN)
    }

    async fn change_tags(
        &self,
        op: Operation,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.enter(op, ids.to_vec(), Some(ids.len())).await?;
        let detail = format!("{} instances: {tags:?}", ids.len());
        describe(op, Some(&detail))?;
        let mut state = self.state();
        Ok(ids
            .iter()
            .map(|id| {
                if let Some(why) = state.serverless.get(id) {
                    return Ok(TagOutcome::NotTaggable(why.clone()));
                }
                if !state.by_provider_id.contains_key(id) {
                    return Ok(TagOutcome::NotFound);
                }
                let carried = state.tags.entry(id.clone()).or_default();
                for (key, value) in tags {
                    if op == Operation::TagInstances {
                        carried.insert(key.clone(), value.clone());
                    } else if carried.get(key) == Some(value) {
                        carried.remove(key);
                    }
                }
                Ok(TagOutcome::Done)
            })
            .collect())
    }
}

#[async_trait]
impl InstanceTags for FakeCloud {
    fn max_batch_size(&self) -> NonZeroUsize {
        self.id_batch()
    }

    fn tagged_label(&self) -> &'static str {
        self.inner.knobs.lock().tagged_label
    }

    async fn tag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.change_tags(Operation::TagInstances, provider_ids, tags)
            .await
    }

    async fn untag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.change_tags(Operation::UntagInstances, provider_ids, tags)
            .await
    }
}

#[async_trait]
impl PodCidrs for FakeCloud {
    fn max_batch_size(&self) -> NonZeroUsize {
        self.id_batch()
    }

    async fn pod_cidrs_of(&self, provider_ids: &[String]) -> BatchResult<PodCidr> {
        self.enter(
            Operation::PodCidrsOf,
            provider_ids.to_vec(),
            Some(provider_ids.len()),
        )
        .await?;
        let state = self.state();
        Ok(provider_ids
            .iter()
            .map(|id| {
                if let Some(why) = state.serverless.get(id) {
                    return Ok(PodCidr::NotApplicable(why.clone()));
                }
                Ok(state
                    .prefixes
                    .get(id)
                    .filter(|_| state.by_provider_id.contains_key(id))
                    .map_or(PodCidr::NotFound, |p| PodCidr::Prefix(*p)))
            })
            .collect())
    }
}
