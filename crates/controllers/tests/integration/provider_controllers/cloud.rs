//! A cloud with only what the provider controllers need — instance tags and
//! pod-CIDR prefixes — and a log of its calls with their batch sizes.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::{
    BatchResult, CloudError, CloudProvider, InstanceTags, PodCidr, PodCidrs, TagOutcome,
};
use parking_lot::Mutex;

pub(crate) const LABEL: &str = "example.com/tagged";

#[derive(Debug, Default)]
struct State {
    /// Provider ID → its instance's tags; absent: no such instance.
    instances: HashMap<String, BTreeMap<String, String>>,
    /// Provider ID → the prefix delegated to it.
    prefixes: HashMap<String, IpNet>,
    /// `(operation, batch size)`.
    calls: Vec<(&'static str, usize)>,
    /// Tag calls still to answer `Throttled`.
    throttle_tags: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct TestCloud {
    state: Arc<Mutex<State>>,
    batch: NonZeroUsize,
}

impl TestCloud {
    pub(crate) fn new(batch: usize) -> Self {
        Self {
            state: Arc::default(),
            batch: NonZeroUsize::new(batch).expect("above zero"),
        }
    }

    pub(crate) fn add_instance(
        &self,
        provider_id: &str,
        tags: &[(&str, &str)],
        prefix: Option<&str>,
    ) {
        let mut state = self.state.lock();
        state.instances.insert(
            provider_id.to_owned(),
            tags.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        if let Some(prefix) = prefix {
            state
                .prefixes
                .insert(provider_id.to_owned(), prefix.parse().expect("a CIDR"));
        }
    }

    /// The next `n` tag calls answer `Throttled` for 100 ms.
    pub(crate) fn throttle_tags(&self, n: usize) {
        self.state.lock().throttle_tags = n;
    }

    pub(crate) fn tags(&self, provider_id: &str) -> BTreeMap<String, String> {
        self.state
            .lock()
            .instances
            .get(provider_id)
            .cloned()
            .unwrap_or_default()
    }

    /// The batch sizes of `operation`'s calls.
    pub(crate) fn calls(&self, operation: &str) -> Vec<usize> {
        self.state
            .lock()
            .calls
            .iter()
            .filter(|(op, _)| *op == operation)
            .map(|(_, n)| *n)
            .collect()
    }

    pub(crate) fn call_count(&self) -> u64 {
        self.state.lock().calls.len() as u64
    }

    fn change(
        &self,
        operation: &'static str,
        ids: &[String],
        tags: &BTreeMap<String, String>,
        add: bool,
    ) -> BatchResult<TagOutcome> {
        let mut state = self.state.lock();
        state.calls.push((operation, ids.len()));
        if add && state.throttle_tags > 0 {
            state.throttle_tags -= 1;
            return Err(CloudError::Throttled {
                retry_after: Duration::from_millis(100),
            });
        }
        Ok(ids
            .iter()
            .map(|id| {
                if id.contains("fargate") {
                    return Ok(TagOutcome::NotTaggable("a Fargate node".into()));
                }
                let Some(instance) = state.instances.get_mut(id) else {
                    return Ok(TagOutcome::NotFound);
                };
                for (k, v) in tags {
                    if add {
                        instance.insert(k.clone(), v.clone());
                    } else if instance.get(k) == Some(v) {
                        instance.remove(k);
                    }
                }
                Ok(TagOutcome::Done)
            })
            .collect())
    }
}

#[async_trait]
impl CloudProvider for TestCloud {
    fn provider_name(&self) -> &'static str {
        "test"
    }

    fn instance_tags(&self) -> Option<&dyn InstanceTags> {
        Some(self)
    }

    fn pod_cidrs(&self) -> Option<&dyn PodCidrs> {
        Some(self)
    }
}

#[async_trait]
impl InstanceTags for TestCloud {
    fn max_batch_size(&self) -> NonZeroUsize {
        self.batch
    }

    fn tagged_label(&self) -> &'static str {
        LABEL
    }

    async fn tag_instances(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.change("tag", ids, tags, true)
    }

    async fn untag_instances(
        &self,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> BatchResult<TagOutcome> {
        self.change("untag", ids, tags, false)
    }
}

#[async_trait]
impl PodCidrs for TestCloud {
    fn max_batch_size(&self) -> NonZeroUsize {
        self.batch
    }

    async fn pod_cidrs_of(&self, ids: &[String]) -> BatchResult<PodCidr> {
        let mut state = self.state.lock();
        state.calls.push(("pod_cidrs", ids.len()));
        Ok(ids
            .iter()
            .map(|id| {
                if id.contains("fargate") {
                    return Ok(PodCidr::NotApplicable("a Fargate node".into()));
                }
                Ok(state
                    .prefixes
                    .get(id)
                    .map_or(PodCidr::NotFound, |p| PodCidr::Prefix(*p)))
            })
            .collect())
    }
}
