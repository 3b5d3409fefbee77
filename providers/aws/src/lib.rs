//! AWS for the cloud-controller-manager: EC2 instances for nodes, pod-CIDR
//! routes in VPC route tables, Network Load Balancers (ELBv2) for Services
//! of type `LoadBalancer`, and the zone and region of the EBS volumes behind
//! PersistentVolumes.
//!
//! Start with [`AwsProviderFactory`]: it parses upstream's INI cloud config
//! ([`AwsConfig`], with `[Global]` keys and `[ServiceOverride "N"]`
//! endpoints) into an [`AwsProvider`] without I/O; `initialize` builds the
//! SDK clients.
//!
//! # Credentials
//! Static keys in the [`Environment`](ccm_cloud_provider::Environment) snapshot
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) are
//! used as given; otherwise the SDK's default chain (web identity / IRSA,
//! profiles, container and instance-profile credentials). `RoleARN` assumes
//! that role with them. The region is `Region` or `Zone` from the config,
//! then `AWS_REGION` / `AWS_DEFAULT_REGION`, then profiles and instance
//! metadata.
//!
//! # Calls to AWS
//! Every call passes a client-side rate limit ([`RateLimits`]: a bucket per
//! action, as AWS keeps them, sized as AWS's for reads and for mutations),
//! waiting up to two seconds for its token, and a process-wide backoff after AWS throttles
//! (upstream's, up to 60 s), which is never waited out: a call held back
//! longer fails with `CloudError::Throttled`. Metrics keep
//! upstream's names (`cloudprovider_aws_api_request_duration_seconds`,
//! `cloudprovider_aws_api_request_errors`,
//! `cloudprovider_aws_api_throttled_requests_total`,
//! `cloudprovider_aws_api_response_status_total`) and are served through
//! `CloudProvider::encode_metrics`. Each request is described to the
//! framework's request fence as it leaves (its `Action`, whether it
//! mutates, its parameters), so `--dry-run` sends the reads and plans the
//! mutations (`CloudProvider::describes_requests`). Every mutation goes
//! through `Api::change`, which answers a dry run's refusal as planned: the
//! operation carries on, a resource it would create standing under a
//! `planned:` identifier that nothing reads, and the plan holds the whole
//! change.
//!
//! # Audit
//! [`inventory`] lists what the provider made for the cluster, with the
//! Service or Node each resource is for.
//!
//! # Testing
//! The feature `test-util` adds `test_util`: the moto harness (one
//! `moto_server` per test process, reset between tests), a seeded estate
//! and the cloud config pointing at moto. This crate's tests and the
//! end-to-end tests of `aws-cloud-controller-manager` share it.

mod addresses;
mod api;
mod clients;
mod cluster_id;
mod config;
mod credentials;
mod factory;
mod instance_tags;
mod instances;
pub mod inventory;
mod load_balancer;
mod metadata;
mod metrics;
mod pod_cidrs;
mod provider;
mod provider_id;
mod routes;
mod tagging;
mod throttle;
mod topology;
mod volumes;
mod zones;

#[cfg(test)]
mod mock_tests;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;

pub use config::{AwsConfig, IpFamily, ServiceOverride, SharedHealthProbe, TypePattern};
pub use factory::AwsProviderFactory;
pub use instance_tags::TAGGED_LABEL;
pub use load_balancer::annotations;
#[doc(hidden)]
pub use load_balancer::service_check::check_service;
pub use provider::AwsProvider;
pub use tagging::{
    CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG, OWNED, ROLE_ELB_TAG, ROLE_INTERNAL_ELB_TAG,
    SERVICE_NAME_TAG,
};
pub use throttle::{RateLimit, RateLimits};
pub use topology::NETWORK_NODE_LABEL;
pub use volumes::EBS_CSI_DRIVER;
pub use zones::ZONE_ID_LABEL;

/// The provider name: `--cloud-provider=aws`.
pub const PROVIDER_NAME: &str = "aws";
