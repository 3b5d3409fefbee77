//! [`AwsProvider`]: the cloud as the interface sees it, and [`Cloud`], what
//! it holds once initialized.

use std::sync::Arc;

use async_trait::async_trait;
use aws_config::meta::region::ProvideRegion;
use aws_sdk_ec2::config::Region;
use ccm_cloud_provider::{
    CloudError, CloudProvider, ConfigError, Environment, InitContext, InstanceTags, Instances,
    Inventory, LoadBalancer, PodCidrs, Routes, Volumes,
};
use tokio::sync::OnceCell;

use crate::api::Api;
use crate::config::AwsConfig;
use crate::credentials::{self, CredentialSource};
use crate::load_balancer::recent::Recent;
use crate::metadata::Metadata;
use crate::metrics::ApiMetrics;
use crate::tagging::ClusterTags;
use crate::throttle::{RateLimit, RateLimits, Throttle};
use crate::topology::Topology;
use crate::zones::ZoneCache;
use crate::{PROVIDER_NAME, clients, cluster_id};

/// AWS: EC2 instances, pod-CIDR routes in VPC route tables, and Network Load
/// Balancers for Services.
///
/// Built by [`crate::AwsProviderFactory`] (or [`AwsProvider::new`]) without
/// I/O; [`CloudProvider::initialize`] builds the SDK clients.
#[derive(Debug)]
pub struct AwsProvider {
    config: Arc<AwsConfig>,
    credentials: CredentialSource,
    env_region: Option<String>,
    rate_limits: RateLimits,
    metrics: Arc<ApiMetrics>,
    cloud: OnceCell<Cloud>,
}

/// The initialized provider: clients and what it knows of its cluster.
#[derive(Debug)]
pub(crate) struct Cloud {
    pub(crate) api: Api,
    pub(crate) config: Arc<AwsConfig>,
    pub(crate) tags: ClusterTags,
    pub(crate) region: String,
    pub(crate) zones: ZoneCache,
    pub(crate) topology: Topology,
    /// Target instances and VPC CIDRs, kept as upstream keeps them.
    pub(crate) recent: Recent,
    vpc: OnceCell<String>,
}

impl AwsProvider {
    /// A provider for `config`, reading credentials and the region from the
    /// `env` snapshot (see the crate docs).
    ///
    /// # Errors
    /// A [`ConfigError`] when the environment holds half a key pair.
    pub fn new(config: AwsConfig, env: &Environment) -> Result<Self, ConfigError> {
        Ok(Self {
            credentials: CredentialSource::from_env(env)?,
            env_region: credentials::region_from_env(env),
            config: Arc::new(config),
            rate_limits: RateLimits::default(),
            metrics: Arc::new(ApiMetrics::default()),
            cloud: OnceCell::new(),
        })
    }

    /// Limits reads and mutations to `limit` each (default:
    /// [`RateLimits::default`], AWS's own buckets).
    #[must_use]
    pub fn with_rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limits = RateLimits::uniform(limit);
        self
    }

    /// The parsed cloud config.
    pub fn config(&self) -> &AwsConfig {
        &self.config
    }

    pub(crate) fn cloud(&self) -> Result<&Cloud, CloudError> {
        self.cloud
            .get()
            .ok_or_else(|| CloudError::msg("the AWS provider was used before initialize()"))
    }

    async fn region(&self) -> Result<String, CloudError> {
        if let Some(region) = self.config.region().or_else(|| self.env_region.clone()) {
            return Ok(region);
        }
        // Profile files, then instance metadata: only reached on a real host.
        aws_config::default_provider::region::default_provider()
            .region()
            .await
            .map(|r| r.to_string())
            .ok_or_else(|| {
                CloudError::msg(
                    "no AWS region: set Region or Zone in [Global] of the cloud config, or AWS_REGION",
                )
            })
    }

    /// A provider already initialized with the given clients, for tests that
    /// answer AWS calls themselves.
    #[cfg(test)]
    pub(crate) fn with_clients(
        config: AwsConfig,
        clients: (
            aws_sdk_ec2::Client,
            aws_sdk_elasticloadbalancing::Client,
            aws_sdk_elasticloadbalancingv2::Client,
        ),
        rate_limit: RateLimit,
    ) -> Self {
        let provider = Self::new(config, &Environment::default())
            .expect("an empty environment is valid")
            .with_rate_limit(rate_limit);
        let throttle = Arc::new(
            Throttle::new(RateLimits::uniform(rate_limit)).expect("tests use valid rate limits"),
        );
        let api = Api::new(clients, throttle, Arc::clone(&provider.metrics));
        let cloud = Cloud::new(
            api,
            Arc::clone(&provider.config),
            ClusterTags::new("test-cluster", false),
            "us-east-1".into(),
        );
        provider.cloud.set(cloud).expect("fresh cell");
        provider
    }
}

impl Cloud {
    fn new(api: Api, config: Arc<AwsConfig>, tags: ClusterTags, region: String) -> Self {
        let vpc = OnceCell::new_with(config.vpc.clone());
        Self {
            topology: Topology::new(config.topology_instance_types.as_ref()),
            api,
            tags,
            region,
            zones: ZoneCache::default(),
            recent: Recent::default(),
            vpc,
            config,
        }
    }

    /// The cluster's VPC: `VPC` from the config, or the VPC of the instance
    /// this process runs on, from instance metadata.
    pub(crate) async fn vpc_id(&self) -> Result<&str, CloudError> {
        self.vpc
            .get_or_try_init(|| self.vpc_from_metadata())
            .await
            .map(String::as_str)
    }

    async fn vpc_from_metadata(&self) -> Result<String, CloudError> {
        let metadata = Metadata::new(&self.config, &self.region)
            .map_err(|e| CloudError::msg(e.to_string()))?;
        metadata.vpc_id().await.map_err(|e| {
            CloudError::other(
                "VPC is not set in [Global] of the cloud config and instance metadata cannot tell it",
                e,
            )
        })
    }
}

#[async_trait]
impl CloudProvider for AwsProvider {
    fn provider_name(&self) -> &'static str {
        PROVIDER_NAME
    }

    /// Resolves the region and credentials chain, builds the clients and
    /// settles the cluster's identity (`cluster_id`). No AWS call is made
    /// when the config names the cluster: a credentials problem then shows
    /// on the first call. Without one, instance metadata and one
    /// `DescribeInstances` read this instance's cluster tag, and a cluster
    /// nothing names is [`CloudError::InvalidInput`] for
    /// `KubernetesClusterID` (the app exits 64). `--cluster-name` is not
    /// used, as upstream.
    async fn initialize(&self, _ctx: &InitContext) -> Result<(), CloudError> {
        self.cloud
            .get_or_try_init(|| async {
                let throttle = Throttle::new(self.rate_limits)
                    .map_err(|e| CloudError::msg(format!("the AWS client-side rate limit: {e}")))?;
                let region = self.region().await?;
                let sdk_region = Region::new(region.clone());
                let credentials = self.credentials.provider(&sdk_region, &self.config).await;
                let api = Api::new(
                    (
                        clients::ec2(&self.config, &sdk_region, credentials.clone()),
                        clients::elb(&self.config, &sdk_region, credentials.clone()),
                        clients::elbv2(&self.config, &sdk_region, credentials),
                    ),
                    Arc::new(throttle),
                    Arc::clone(&self.metrics),
                );
                // Never `ctx.cluster_name`: see `cluster_id`.
                let tags = cluster_id::resolve(&self.config, &region, &api).await?;
                let cloud = Cloud::new(api, Arc::clone(&self.config), tags, region);
                tracing::info!(
                    region = %cloud.region,
                    cluster_id = cloud.tags.id(),
                    "AWS provider initialized"
                );
                Ok::<_, CloudError>(cloud)
            })
            .await
            .map(|_| ())
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }

    fn volumes(&self) -> Option<&dyn Volumes> {
        Some(self)
    }

    fn instance_tags(&self) -> Option<&dyn InstanceTags> {
        Some(self)
    }

    fn pod_cidrs(&self) -> Option<&dyn PodCidrs> {
        Some(self)
    }

    fn inventory(&self) -> Option<&dyn Inventory> {
        Some(self)
    }

    /// Every request goes through a client with `clients::FenceEachRequest`.
    fn describes_requests(&self) -> bool {
        true
    }

    fn encode_metrics(&self, out: &mut String) {
        self.metrics.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn initialize_refuses_a_rate_limit_it_cannot_keep() {
        let provider = AwsProvider::new(AwsConfig::default(), &Environment::default())
            .expect("an empty environment is valid")
            .with_rate_limit(RateLimit { qps: 0.0, burst: 1 });
        let err = provider
            .initialize(&InitContext::new("test-cluster"))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the AWS client-side rate limit: 0 calls a second"),
            "{err}"
        );
        assert!(provider.cloud().is_err(), "nothing was initialized");
    }
}
