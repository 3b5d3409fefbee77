//! Controllers a provider adds to the generic ones (upstream: the
//! controllers a cloud's `main.go` registers beside `k8s.io/cloud-provider`'s,
//! such as cloud-provider-aws's `tagging` and `nodeipam`).
//!
//! A provider declares them in [`ProviderFactory::PROVIDER_CONTROLLERS`](crate::ProviderFactory::PROVIDER_CONTROLLERS):
//! each is a name `--controllers` accepts in that binary only, off unless
//! named there, backed by one of the framework's cloud-agnostic controllers
//! ([`ProviderControllerKind`]) and the capability that controller needs.

/// Which cloud-agnostic controller a provider controller runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProviderControllerKind {
    /// Puts `--tags` on the instance of every node that joins and removes
    /// them when the node is deleted, through [`InstanceTags`](crate::InstanceTags).
    InstanceTagging,
    /// Sets `spec.podCIDRs` of nodes without one from the cloud's prefix
    /// for the node ([`PodCidrs`](crate::PodCidrs)), and in dual-stack mode
    /// also an IPv4 range from `--cluster-cidr`.
    NodeIpam,
}

/// One controller a provider adds, as `--controllers` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderController {
    /// The name `--controllers` accepts, such as `tagging`. Like upstream's
    /// names, never renamed.
    pub name: &'static str,
    /// What it does.
    pub kind: ProviderControllerKind,
    /// The prefix of its metric names, so they are upstream's (such as
    /// `cloudprovider_aws` for `cloudprovider_aws_tagging_controller_work_item_errors_total`).
    pub metrics_prefix: &'static str,
}
