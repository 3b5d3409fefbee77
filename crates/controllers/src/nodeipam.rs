//! A provider's node-IPAM controller (cloud-provider-aws's `nodeipam`):
//! a node without pod CIDRs gets the prefix the cloud delegated to its
//! instance (AWS: the IPv6 prefix on its network interface); with
//! `--dualstack`, an IPv4 range from `--cluster-cidr` first, as upstream
//! orders them.
//!
//! # Guarantees
//! - Nodes that join together are looked up together: N nodes cost
//!   ceil(N / batch) cloud calls (AWS: one `DescribeNetworkInterfaces` per
//!   200 instances).
//! - A node that has pod CIDRs is never changed (its IPv4 range counts as
//!   taken); nor is a node without a provider ID, or one the provider does
//!   not serve (Fargate).
//! - One merge patch per node, carrying the resourceVersion it was decided
//!   on, sets `spec.podCIDR` and `spec.podCIDRs`; an IPv4 range whose patch
//!   failed is given back.
//! - An instance without a usable prefix (none, several, not found yet) is
//!   retried with backoff, at most [`MAX_RETRIES`](crate::provider_shared::MAX_RETRIES)
//!   times, each counted in `<prefix>_nodeipam_controller_work_item_errors_total`.
//! - No free IPv4 range: a `CIDRNotAvailable` Warning on the node, as
//!   upstream, and a retry with backoff; a failed patch (but a conflict): a
//!   `CIDRAssignmentFailed` Warning.

mod ranges;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{CloudProvider, PodCidr, PodCidrs, ProviderController, RateLimiter};
use ccm_runtime::controller::Triggers;
use ccm_runtime::{
    Action, BatchCall, Batcher, Context, Events, Informer, ReconcileError, WatchEvent,
};
use futures::FutureExt;
use ipnet::{IpNet, Ipv4Net};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;

use crate::Started;
use crate::provider_shared::{ProviderControllerSettings, RetryBudget, WorkItemErrors};
use crate::settings::ControllerSettings;
use ranges::Ipv4Ranges;

/// How long the first node of a burst waits for others to share its call.
const BATCH_WINDOW: Duration = Duration::from_millis(100);
/// The component name of this controller's events (upstream's).
const EVENT_SOURCE: &str = "cidrAllocator";

struct NodeIpam {
    api: Api<Node>,
    batcher: Batcher<PodCidr, String>,
    events: Events,
    informer: Arc<Informer<Node>>,
    /// Dual-stack mode's IPv4 ranges.
    ipv4: Option<Arc<Mutex<Ipv4Ranges>>>,
    rate: Option<Arc<RateLimiter>>,
    retries: RetryBudget,
}

/// The IPv4 cluster CIDR dual-stack mode allocates from, checked against
/// the mask size.
///
/// # Errors
/// One line naming the flag at fault.
pub fn dual_stack_cluster_cidr(cluster_cidrs: &[IpNet], mask: u8) -> Result<Ipv4Net, String> {
    let cluster = match cluster_cidrs {
        [IpNet::V4(v4)] => *v4,
        [] => return Err("--cluster-cidr is required: the nodeipam controller runs with --dualstack".into()),
        [_] => return Err("--cluster-cidr: the nodeipam controller with --dualstack allocates IPv4 ranges from an IPv4 CIDR".into()),
        _ => return Err("--cluster-cidr: the nodeipam controller takes one CIDR, not several".into()),
    };
    ranges::check(cluster, mask)?;
    Ok(cluster)
}

pub(crate) fn start(
    spec: &ProviderController,
    ctx: &Context,
    settings: &ControllerSettings,
    own: &ProviderControllerSettings,
) -> Started {
    let Some(pod_cidrs) = ctx.cloud.pod_cidrs() else {
        return Started::Off("the cloud provider delegates no pod CIDRs".into());
    };
    let ipv4 = if own.dual_stack {
        match dual_stack_cluster_cidr(&settings.cluster_cidrs, own.node_cidr_mask_size)
            .and_then(|cidr| Ipv4Ranges::new(cidr, own.node_cidr_mask_size))
        {
            Ok(ranges) => Some(Arc::new(Mutex::new(ranges))),
            Err(err) => return Started::Off(err),
        }
    } else {
        None
    };
    let informer = ctx.informers.nodes();
    if let Some(ranges) = &ipv4 {
        let ranges = ranges.clone();
        if let Err(err) = informer.on_event(move |event| {
            if let WatchEvent::Delete(node) = event {
                for net in ipv4_cidrs(node) {
                    ranges.lock().release(net);
                }
            }
        }) {
            return Started::Off(err.to_string());
        }
    }
    let state = Arc::new(NodeIpam {
        api: Api::all(ctx.client.clone()),
        batcher: Batcher::spawn(
            call(ctx),
            pod_cidrs.max_batch_size(),
            BATCH_WINDOW,
            NonZeroUsize::MIN,
        ),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        informer: informer.clone(),
        ipv4,
        rate: own
            .nodeipam_rate
            .and_then(|r| RateLimiter::new(r.qps, r.burst).ok())
            .map(Arc::new),
        retries: RetryBudget::new(WorkItemErrors::register(
            &ctx.metrics,
            spec.metrics_prefix,
            "nodeipam",
        )),
    });
    crate::run_controller(
        spec.name,
        &informer,
        Triggers::default(),
        ctx,
        move |node| state.clone().reconcile(node),
    )
}

/// `pod_cidrs`, as the batcher takes it: one call at a time, so nodes
/// queued meanwhile fill the next batch.
fn call(ctx: &Context) -> BatchCall<PodCidr, String> {
    let cloud = ctx.cloud.clone();
    Arc::new(move |ids| {
        let cloud = cloud.clone();
        async move { cloud.pod_cidrs_of(&ids).await }.boxed()
    })
}

/// The node's pod CIDRs (`spec.podCIDRs`, else `spec.podCIDR`).
fn pod_cidrs_of(node: &Node) -> Vec<String> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    match (&spec.pod_cidrs, &spec.pod_cidr) {
        (Some(cidrs), _) if !cidrs.is_empty() => cidrs.clone(),
        (_, Some(cidr)) if !cidr.is_empty() => vec![cidr.clone()],
        _ => Vec::new(),
    }
}

fn ipv4_cidrs(node: &Node) -> impl Iterator<Item = Ipv4Net> {
    pod_cidrs_of(node)
        .into_iter()
        .filter_map(|c| c.parse::<Ipv4Net>().ok())
}

impl NodeIpam {
    async fn reconcile(self: Arc<Self>, node: Arc<Node>) -> Result<Action, ReconcileError> {
        if node.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        if !pod_cidrs_of(&node).is_empty() {
            if let Some(ranges) = &self.ipv4 {
                for net in ipv4_cidrs(&node) {
                    ranges.lock().occupy(net);
                }
            }
            return Ok(Action::await_change());
        }
        let Some(provider_id) = ccm_cloud_provider::provider_id(&node) else {
            return Ok(Action::await_change());
        };
        let result = self.assign(&node, provider_id).await;
        self.retries
            .settle(&node, provider_id, result, "no pod CIDR after")
    }

    async fn assign(&self, node: &Node, provider_id: &str) -> Result<Action, ReconcileError> {
        let name = node.name_any();
        if let Some(rate) = &self.rate {
            rate.acquire().await;
        }
        let prefix = match self.batcher.lookup(provider_id.to_owned()).await? {
            PodCidr::Prefix(prefix) => prefix,
            PodCidr::NotApplicable(reason) => {
                tracing::debug!(node = %name, %reason, "no pod CIDR from the cloud");
                return Ok(Action::await_change());
            }
            PodCidr::NotFound => {
                return Err(ReconcileError::NotReady(format!(
                    "the cloud has no network interface for node {name} ({provider_id}) yet"
                )));
            }
        };
        let ipv4 = match &self.ipv4 {
            Some(ranges) => Some(self.allocate(ranges, node).await?),
            None => None,
        };
        let cidrs: Vec<String> = ipv4
            .iter()
            .map(ToString::to_string)
            .chain([prefix.to_string()])
            .collect();
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": node.metadata.resource_version },
            "spec": { "podCIDR": cidrs[0], "podCIDRs": cidrs },
        });
        if let Err(err) = self
            .api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            if let (Some(ranges), Some(net)) = (&self.ipv4, ipv4) {
                ranges.lock().release(net);
            }
            let conflict = matches!(&err, kube::Error::Api(status) if status.code == 409);
            if !conflict {
                self.events
                    .warning(
                        &node.object_ref(&()),
                        "CIDRAssignmentFailed",
                        format!("Node {name} status is now: CIDRAssignmentFailed"),
                    )
                    .await;
            }
            return Err(err.into());
        }
        tracing::info!(node = %name, pod_cidrs = ?cidrs, "pod CIDRs set");
        Ok(Action::await_change())
    }

    /// The next free IPv4 range, once every known node's range counts as
    /// taken.
    async fn allocate(
        &self,
        ranges: &Mutex<Ipv4Ranges>,
        node: &Node,
    ) -> Result<Ipv4Net, ReconcileError> {
        self.informer.wait_until_ready().await;
        let nodes = self.informer.store().state();
        let allocated = {
            let mut ranges = ranges.lock();
            for other in &nodes {
                for net in ipv4_cidrs(other) {
                    ranges.occupy(net);
                }
            }
            ranges.allocate()
        };
        if let Some(net) = allocated {
            return Ok(net);
        }
        let name = node.name_any();
        self.events
            .warning(
                &node.object_ref(&()),
                "CIDRNotAvailable",
                format!("Node {name} status is now: CIDRNotAvailable"),
            )
            .await;
        Err(ReconcileError::NotReady(format!(
            "no free IPv4 range left in --cluster-cidr for node {name}"
        )))
    }
}
