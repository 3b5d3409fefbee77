//! What moto holds, read through the AWS API as an operator would, and the
//! AWS calls the CCM reports in its metrics.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, SecurityGroup};
use aws_sdk_elasticloadbalancingv2::types::{Listener, LoadBalancer, TargetGroup};

/// `(protocol, from port, to port, CIDR, description)`: one ingress rule.
pub use ccm_provider_aws::test_util::IngressRule as Rule;

pub async fn load_balancers(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
) -> anyhow::Result<Vec<LoadBalancer>> {
    let out = elbv2.describe_load_balancers().send().await?;
    Ok(out.load_balancers().to_vec())
}

pub async fn target_groups(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
) -> anyhow::Result<Vec<TargetGroup>> {
    let out = elbv2.describe_target_groups().send().await?;
    Ok(out.target_groups().to_vec())
}

pub async fn listeners(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    lb_arn: &str,
) -> anyhow::Result<Vec<Listener>> {
    let out = elbv2
        .describe_listeners()
        .load_balancer_arn(lb_arn)
        .send()
        .await?;
    Ok(out.listeners().to_vec())
}

/// `(instance ID, port)` of the group's registered targets.
pub async fn targets(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    tg_arn: &str,
) -> anyhow::Result<BTreeSet<(String, i32)>> {
    let out = elbv2
        .describe_target_health()
        .target_group_arn(tg_arn)
        .send()
        .await?;
    Ok(out
        .target_health_descriptions()
        .iter()
        .filter_map(|d| d.target())
        .map(|t| {
            (
                t.id().unwrap_or_default().to_owned(),
                t.port().unwrap_or_default(),
            )
        })
        .collect())
}

/// The tags of an ELBv2 resource.
pub async fn tags(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    arn: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let out = elbv2.describe_tags().resource_arns(arn).send().await?;
    Ok(out
        .tag_descriptions()
        .iter()
        .flat_map(|d| d.tags())
        .map(|t| {
            (
                t.key().unwrap_or_default().to_owned(),
                t.value().unwrap_or_default().to_owned(),
            )
        })
        .collect())
}

/// The security groups of `vpc`.
pub async fn security_groups(
    ec2: &aws_sdk_ec2::Client,
    vpc: &str,
) -> anyhow::Result<Vec<SecurityGroup>> {
    let out = ec2
        .describe_security_groups()
        .filters(Filter::builder().name("vpc-id").values(vpc).build())
        .send()
        .await?;
    Ok(out.security_groups().to_vec())
}

/// The CIDR ingress rules of security group `group`.
pub async fn ingress(ec2: &aws_sdk_ec2::Client, group: &str) -> anyhow::Result<BTreeSet<Rule>> {
    Ok(ccm_provider_aws::test_util::ingress_rules(ec2, group).await?)
}

/// `(destination CIDR, instance ID)` of the table's routes to instances.
pub async fn instance_routes(
    ec2: &aws_sdk_ec2::Client,
    table: &str,
) -> anyhow::Result<BTreeSet<(String, String)>> {
    let out = ec2
        .describe_route_tables()
        .route_table_ids(table)
        .send()
        .await?;
    Ok(out
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter_map(|r| {
            Some((
                r.destination_cidr_block()?.to_owned(),
                r.instance_id()?.to_owned(),
            ))
        })
        .collect())
}

/// The instance's state name (`running`, `terminated`, ...) and whether its
/// source/destination check is on.
pub async fn instance(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
) -> anyhow::Result<(String, Option<bool>)> {
    let out = ec2.describe_instances().instance_ids(id).send().await?;
    let instance = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .ok_or_else(|| anyhow::anyhow!("no instance {id}"))?;
    let state = instance
        .state()
        .and_then(|s| s.name())
        .map(|n| n.as_str().to_owned())
        .unwrap_or_default();
    Ok((state, instance.source_dest_check()))
}

/// Successful AWS calls by upstream's `request` label, read from the
/// CCM's `/metrics` (`cloudprovider_aws_api_request_duration_seconds`).
pub fn calls(metrics: &str) -> BTreeMap<String, u64> {
    let prefix = "cloudprovider_aws_api_request_duration_seconds_count{request=\"";
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(request, count)| (request.to_owned(), count.trim().parse().unwrap_or_default()))
        .collect()
}

/// The calls among [`calls`] that change AWS (all but `describe_*`).
pub fn mutations(metrics: &str) -> BTreeMap<String, u64> {
    calls(metrics)
        .into_iter()
        .filter(|(request, _)| !request.starts_with("describe"))
        .collect()
}
