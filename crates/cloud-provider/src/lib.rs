//! The cloud-provider interface: the API boundary between the cloud-agnostic
//! controllers and the code that knows one cloud.
//!
//! Start with [`CloudProvider`]. A provider implements it and exposes each
//! capability it has — [`Instances`], [`LoadBalancer`], [`Routes`],
//! [`ServiceObserver`], [`Volumes`] — through
//! an accessor that returns `None` when the capability is absent, in which
//! case the controller that needs it stays off. [`ProviderFactory`] builds a
//! provider from its cloud-config file and environment.
//!
//! The model is Kubernetes' `k8s.io/cloud-provider` `Interface` with
//! `InstancesV2` semantics, with one addition: instance lookups come in batch
//! form ([`Instances::instances_metadata`] and friends) with a provider-declared
//! [`Instances::max_batch_size`], so that N nodes cost ceil(N / batch) cloud
//! calls instead of N.
//!
//! A provider may also add controllers of its own to the generic ones
//! ([`ProviderController`], declared by its factory), each backed by a
//! capability: [`InstanceTags`] and [`PodCidrs`].
//!
//! [`gcfg`] reads the INI dialect of upstream's cloud configs, for
//! providers that accept upstream's files as they are.
//!
//! [`annotations`] helps providers warn about annotation keys they do not
//! know ([`LoadBalancerWarning`]) instead of failing.
//!
//! [`server_delay`] reads the delays servers ask for (`Retry-After`,
//! `RateLimit-Reset`) with checked arithmetic, clamped to
//! [`server_delay::MAX_SERVER_DELAY`].
//!
//! It also holds the one client-side [`RateLimiter`] that the Kubernetes
//! client and every provider use, so that limits are written once.
//!
//! This crate has no Kubernetes client and no cloud SDK, and it never will:
//! it depends on `k8s-openapi` types, and on tokio's clock and `governor`
//! for the rate limiter only.

#![warn(missing_docs)]

pub mod annotations;
mod config;
mod error;
pub mod fence;
pub mod gcfg;
mod instance_tags;
mod instances;
mod inventory;
mod load_balancer;
mod pod_cidrs;
mod provider;
mod provider_controllers;
mod rate_limit;
mod routes;
pub mod server_delay;
mod services;
mod target_health;
mod volumes;

pub use config::{
    CloudConfig, ConfigError, Environment, ProviderFactory, deserialize_message_without_values,
};
pub use error::{BoxError, CloudError};
pub use instance_tags::{InstanceTags, TagOutcome};
pub use instances::{
    BatchResult, InstanceMetadata, Instances, NodeAddress, NodeAddressType, provider_id,
};
pub use inventory::{Inventory, OwnedResource, Owner};
pub use load_balancer::{
    EnsuredLoadBalancer, IpMode, LoadBalancer, LoadBalancerIngress, LoadBalancerStatus,
    LoadBalancerWarning, PortStatus, default_load_balancer_name,
};
pub use pod_cidrs::{PodCidr, PodCidrs};
pub use provider::{CloudProvider, InitContext};
pub use provider_controllers::{ProviderController, ProviderControllerKind};
pub use rate_limit::{InvalidRateLimit, RateLimiter};
pub use routes::{Route, RouteCreate, Routes};
pub use services::ServiceObserver;
pub use target_health::{LoadBalancerHealth, TargetHealth, TargetState, health_by_node};
pub use volumes::Volumes;

/// Re-exported so providers name the same CIDR type as [`Route`].
pub use ipnet;
/// Re-exported so providers name the same Kubernetes types as the interface.
pub use k8s_openapi;
