//! The capabilities behind providers' own controllers, metered like the
//! rest: tagging changes the cloud, so it is fenced; pod-CIDR lookups are
//! reads.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use async_trait::async_trait;
use ccm_cloud_provider::{BatchResult, CloudError, InstanceTags, PodCidr, PodCidrs, TagOutcome};

use super::MeteredCloud;

impl MeteredCloud {
    fn instance_tags_inner(&self) -> Result<&dyn InstanceTags, CloudError> {
        self.inner.instance_tags().ok_or(CloudError::NotImplemented)
    }

    fn pod_cidrs_inner(&self) -> Result<&dyn PodCidrs, CloudError> {
        self.inner.pod_cidrs().ok_or(CloudError::NotImplemented)
    }
}

#[async_trait]
impl InstanceTags for MeteredCloud {
    fn max_batch_size(&self) -> NonZeroUsize {
        self.inner
            .instance_tags()
            .map_or(NonZeroUsize::MIN, InstanceTags::max_batch_size)
    }

    fn tagged_label(&self) -> &'static str {
        self.inner
            .instance_tags()
            .map_or("", InstanceTags::tagged_label)
    }

    async fn tag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.mutate_batch(
            "tag_instances",
            provider_ids.len(),
            || provider_ids.join(","),
            async {
                self.instance_tags_inner()?
                    .tag_instances(provider_ids, tags)
                    .await
            },
        )
        .await
    }

    async fn untag_instances(
        &self,
        provider_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.mutate_batch(
            "untag_instances",
            provider_ids.len(),
            || provider_ids.join(","),
            async {
                self.instance_tags_inner()?
                    .untag_instances(provider_ids, tags)
                    .await
            },
        )
        .await
    }
}

#[async_trait]
impl PodCidrs for MeteredCloud {
    fn max_batch_size(&self) -> NonZeroUsize {
        self.inner
            .pod_cidrs()
            .map_or(NonZeroUsize::MIN, PodCidrs::max_batch_size)
    }

    async fn pod_cidrs_of(&self, provider_ids: &[String]) -> BatchResult<PodCidr> {
        self.observe("pod_cidrs_of", Some(provider_ids.len()), async {
            self.pod_cidrs_inner()?.pod_cidrs_of(provider_ids).await
        })
        .await
    }
}
