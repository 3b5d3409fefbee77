//! The load-balancer suite's fixture: moto seeded with an estate, the
//! provider against it, the Service under test, and readers of what AWS
//! then holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_ec2::types::Filter;
use aws_sdk_elasticloadbalancingv2::types::{LoadBalancer as Nlb, TargetGroup};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{CloudProvider, LoadBalancer};
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{IngressRule, Moto, ec2, elbv2, moto, provider};

pub(crate) const UID: &str = "6c1f0e2a-1b2c-4d3e-8f4a-5b6c7d8e9f00";
pub(crate) const LB_NAME: &str = "a6c1f0e2a1b2c4d3e8f4a5b6c7d8e9f0";

pub(crate) fn service(annotations: &[(&str, &str)], ports: &[(i32, i32)]) -> Service {
    ccm_provider_aws::test_util::nlb_service(UID, annotations, ports)
}

pub(crate) struct Fixture {
    pub(crate) moto: Moto,
    pub(crate) estate: Estate,
    pub(crate) provider: Arc<dyn CloudProvider>,
}

impl Fixture {
    /// `instances` seeded, with upstream's default config.
    pub(crate) async fn new(instances: usize) -> Self {
        Self::with_global(instances, "").await
    }

    /// `instances` seeded, with `global` added to `[Global]`.
    pub(crate) async fn with_global(instances: usize, global: &str) -> Self {
        let moto = moto().await;
        let estate = seed::estate(&ec2(&moto), instances).await.expect("seeded");
        let provider = provider(&moto, &format!("VPC = {}\n{global}", estate.vpc)).await;
        Self {
            moto,
            estate,
            provider,
        }
    }

    pub(crate) fn lb(&self) -> &dyn LoadBalancer {
        self.provider
            .load_balancer()
            .expect("AWS has load balancers")
    }

    pub(crate) fn nodes(&self, which: &[usize]) -> Vec<Arc<Node>> {
        which
            .iter()
            .map(|i| self.estate.instances[*i].node())
            .collect()
    }

    pub(crate) async fn load_balancers(&self) -> Vec<Nlb> {
        let out = elbv2(&self.moto)
            .describe_load_balancers()
            .send()
            .await
            .expect("described");
        out.load_balancers().to_vec()
    }

    pub(crate) async fn target_groups(&self) -> Vec<TargetGroup> {
        let out = elbv2(&self.moto)
            .describe_target_groups()
            .send()
            .await
            .expect("described");
        out.target_groups().to_vec()
    }

    pub(crate) async fn tags(&self, arn: &str) -> BTreeMap<String, String> {
        let out = elbv2(&self.moto)
            .describe_tags()
            .resource_arns(arn)
            .send()
            .await
            .expect("described");
        out.tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .map(|t| {
                (
                    t.key().unwrap_or_default().to_owned(),
                    t.value().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    pub(crate) async fn targets(&self, tg_arn: &str) -> BTreeSet<(String, i32)> {
        let out = elbv2(&self.moto)
            .describe_target_health()
            .target_group_arn(tg_arn)
            .send()
            .await
            .expect("described");
        out.target_health_descriptions()
            .iter()
            .filter_map(|d| d.target())
            .map(|t| {
                (
                    t.id().unwrap_or_default().to_owned(),
                    t.port().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// `(protocol, from, to, cidr, description)` of a security group's ingress.
    pub(crate) async fn ingress(&self, group: &str) -> BTreeSet<IngressRule> {
        ccm_provider_aws::test_util::ingress_rules(&ec2(&self.moto), group)
            .await
            .expect("described")
    }

    /// The CIDRs of the (one) load balancer's subnets, sorted: where its
    /// health checks come from.
    pub(crate) async fn load_balancer_subnet_cidrs(&self) -> Vec<String> {
        let lbs = self.load_balancers().await;
        let ids: Vec<String> = lbs[0]
            .availability_zones()
            .iter()
            .filter_map(|z| z.subnet_id().map(str::to_owned))
            .collect();
        ccm_provider_aws::test_util::subnet_cidrs(&self.moto, &ids).await
    }

    /// The CIDRs the node group admits `port` from under `description`.
    pub(crate) async fn admitted(&self, port: i32, description: &str) -> Vec<String> {
        let mut cidrs: Vec<String> = self
            .ingress(&self.estate.node_security_group)
            .await
            .into_iter()
            .filter(|(_, from, _, _, d)| *from == port && d == description)
            .map(|(_, _, _, cidr, _)| cidr)
            .collect();
        cidrs.sort();
        cidrs
    }

    pub(crate) async fn security_group_ids(&self) -> BTreeSet<String> {
        let out = ec2(&self.moto)
            .describe_security_groups()
            .filters(
                Filter::builder()
                    .name("vpc-id")
                    .values(&self.estate.vpc)
                    .build(),
            )
            .send()
            .await
            .expect("described");
        out.security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_owned))
            .collect()
    }
}

pub(crate) fn owned_by_the_service(tags: &BTreeMap<String, String>) -> bool {
    tags.get(&seed::cluster_tag()).map(String::as_str) == Some("owned")
        && tags.get("kubernetes.io/service-name").map(String::as_str) == Some("shop/web")
}

/// Successful calls that change AWS, by upstream's `request` label, from
/// the provider's own metrics.
pub(crate) fn mutations(provider: &dyn CloudProvider) -> BTreeMap<String, u64> {
    calls(provider)
        .into_iter()
        .filter(|(request, _)| !request.starts_with("describe"))
        .collect()
}

/// Successful calls by `request` label, from the provider's metrics.
pub(crate) fn calls(provider: &dyn CloudProvider) -> BTreeMap<String, u64> {
    let mut text = String::new();
    provider.encode_metrics(&mut text);
    let prefix = "cloudprovider_aws_api_request_duration_seconds_count{request=\"";
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(request, count)| (request.to_owned(), count.trim().parse().unwrap_or_default()))
        .collect()
}

pub(crate) fn rule(protocol: &str, port: i32, cidr: &str, description: &str) -> IngressRule {
    (protocol.into(), port, port, cidr.into(), description.into())
}
