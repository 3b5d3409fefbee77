//! The provider itself (upstream's `cloudprovider.Interface`): what it
//! learns when initialized, the capabilities it offers, and the factory the
//! app builds it with.

use async_trait::async_trait;

use crate::{
    CloudError, InstanceTags, Instances, Inventory, LoadBalancer, PodCidrs, Routes,
    ServiceObserver, Volumes,
};

/// What a provider learns about its cluster when it is initialized.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InitContext {
    /// `--cluster-name`: the ownership tag for everything the provider
    /// creates.
    pub cluster_name: String,
    /// This process's leader-election identity (host name and a unique
    /// suffix), for providers that tell their callers apart, such as the
    /// fake cloud's server, whose call log names the replica behind each
    /// call.
    pub identity: Option<String>,
}

impl InitContext {
    /// A context for `cluster_name`.
    pub fn new(cluster_name: impl Into<String>) -> Self {
        Self {
            cluster_name: cluster_name.into(),
            identity: None,
        }
    }

    /// The same context with the process's leader-election `identity`.
    #[must_use]
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }
}

/// A cloud (upstream's `cloudprovider.Interface`).
///
/// Capabilities are optional: each accessor returns `None` by default, and a
/// controller whose capability is absent stays off and says why in the log.
///
/// # Contract for implementers
/// - A provider never talks to the Kubernetes API: everything it needs
///   arrives as arguments.
/// - The accessors are cheap and always return the same answer.
#[async_trait]
pub trait CloudProvider: Send + Sync + std::fmt::Debug + 'static {
    /// The name `--cloud-provider` accepts and events and metrics use, such
    /// as `aws`.
    fn provider_name(&self) -> &'static str;

    /// Whether the provider can tell this cluster's cloud resources from
    /// other clusters' (upstream's `HasClusterID`). A provider that cannot
    /// is only run with `--allow-untagged-cloud`.
    fn has_cluster_id(&self) -> bool {
        true
    }

    /// Called once before any controller starts. Set up clients and
    /// credentials here; return an error only when the provider cannot work
    /// at all: [`CloudError::InvalidInput`] when the configuration is what
    /// is wrong (the process exits 64), anything else otherwise (exit 1).
    async fn initialize(&self, ctx: &InitContext) -> Result<(), CloudError> {
        let _ = ctx;
        Ok(())
    }

    /// Instance lookups, if this cloud has them.
    fn instances(&self) -> Option<&dyn Instances> {
        None
    }

    /// Load balancers, if this cloud has them.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        None
    }

    /// Pod-CIDR routes, if this cloud has them.
    fn routes(&self) -> Option<&dyn Routes> {
        None
    }

    /// The whole set of Services, if this cloud keeps resources in step
    /// with it (see [`ServiceObserver`]); the service-observer controller
    /// runs only when this is `Some`.
    fn service_observer(&self) -> Option<&dyn ServiceObserver> {
        None
    }

    /// Volume labels, if this cloud has volumes (see [`Volumes`]); the
    /// persistentvolume-label controller runs only when this is `Some`.
    fn volumes(&self) -> Option<&dyn Volumes> {
        None
    }

    /// Tags on nodes' instances, if this cloud has them; the provider's
    /// [`ProviderControllerKind::InstanceTagging`](crate::ProviderControllerKind::InstanceTagging)
    /// controller needs it.
    fn instance_tags(&self) -> Option<&dyn InstanceTags> {
        None
    }

    /// Pod CIDRs the cloud delegates to nodes, if it does; the provider's
    /// [`ProviderControllerKind::NodeIpam`](crate::ProviderControllerKind::NodeIpam)
    /// controller needs it.
    fn pod_cidrs(&self) -> Option<&dyn PodCidrs> {
        None
    }

    /// What the provider made for a cluster, if it can list it; the
    /// `audit` subcommand needs it.
    fn inventory(&self) -> Option<&dyn Inventory> {
        None
    }

    /// Whether every request this provider sends is described to the
    /// request fence first ([`fence::check_request`](crate::fence::check_request)),
    /// so that `--dry-run` can send its reads and plan its mutations. A
    /// provider that does not is never called for a mutation in a dry run:
    /// the plan then names the call without saying whether it would change
    /// anything.
    fn describes_requests(&self) -> bool {
        false
    }

    /// Appends the provider's own metrics (such as upstream's
    /// `cloudprovider_aws_api_request_duration_seconds`) to `out`, in the
    /// OpenMetrics text format without the final `# EOF` line. They are
    /// served on `/metrics` after the framework's metrics, which already
    /// count and time every interface call by operation and outcome.
    fn encode_metrics(&self, out: &mut String) {
        let _ = out;
    }
}
