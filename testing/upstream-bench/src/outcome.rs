//! What a binary left behind, as facts two runs can compare: the first
//! node's labels, annotations, addresses, taints, conditions and provider
//! ID; the Service's finalizers, annotations and status; which Events were
//! recorded; the load balancer's, listener's, target group's and security
//! groups' settings and tags; the node security group's rules; the routes
//! and the instances' source/destination check.
//!
//! Whatever differs from run to run by construction (instance IDs, node
//! names, addresses, ARNs, DNS names, the node port) is replaced by a
//! placeholder, so that a difference between two runs' facts is a
//! difference in behaviour.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use aws_sdk_ec2::types::Filter;
use ccm_provider_aws::test_util::seed::Estate;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

use crate::cluster::SERVICE;

/// Fact name to value.
pub(crate) type Outcome = BTreeMap<String, String>;

/// Where the facts are read.
pub(crate) struct Sources<'a> {
    pub(crate) client: kube::Client,
    pub(crate) ec2: &'a aws_sdk_ec2::Client,
    pub(crate) elbv2: &'a aws_sdk_elasticloadbalancingv2::Client,
    pub(crate) estate: &'a Estate,
}

/// Reads every fact.
pub(crate) async fn collect(from: &Sources<'_>) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new();
    let places = Placeholders::of(from.estate);
    let first = &from.estate.instances[0].private_dns_name;
    let node = Api::<Node>::all(from.client.clone()).get(first).await?;
    node_facts(&serde_json::to_value(&node)?, &places, &mut out);
    let service = Api::<Service>::namespaced(from.client.clone(), "default")
        .get(SERVICE)
        .await?;
    let node_port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .and_then(|p| p.node_port);
    service_facts(&serde_json::to_value(&service)?, &places, &mut out);
    let events = Api::<Event>::all(from.client.clone())
        .list(&ListParams::default())
        .await?;
    for event in events.items {
        let kind = event.involved_object.kind.unwrap_or_default();
        let reason = event.reason.unwrap_or_default();
        let severity = event.type_.unwrap_or_default();
        out.insert(
            format!("event {kind} {severity} {reason}"),
            "recorded".into(),
        );
    }
    let mut places = Placeholders {
        node_port,
        ..places
    };
    // The load balancer's name comes from the Service's uid.
    let lbs = from.elbv2.describe_load_balancers().send().await?;
    for name in lbs
        .load_balancers()
        .iter()
        .filter_map(|lb| lb.load_balancer_name())
    {
        places.names.insert(0, (name.to_owned(), "<lb-name>"));
    }
    cloud_facts(from, lbs.load_balancers(), &places, &mut out).await?;
    Ok(out)
}

/// Replacements for what differs between runs by construction.
struct Placeholders {
    names: Vec<(String, &'static str)>,
    node_port: Option<i32>,
}

impl Placeholders {
    fn of(estate: &Estate) -> Self {
        let mut names = Vec::new();
        for instance in &estate.instances {
            names.push((instance.private_dns_name.clone(), "<node>"));
            names.push((instance.id.clone(), "<instance>"));
            names.push((instance.private_ip.clone(), "<ip>"));
        }
        names.push((estate.vpc.clone(), "<vpc>"));
        names.push((estate.node_security_group.clone(), "<node-sg>"));
        names.push((estate.route_table.clone(), "<route-table>"));
        for subnet in &estate.public_subnets {
            names.push((subnet.clone(), "<subnet>"));
        }
        // Longest first, so that no name is replaced inside a longer one.
        names.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
        Self {
            names,
            node_port: None,
        }
    }

    fn apply(&self, value: &str) -> String {
        let mut out = value.to_owned();
        for (name, placeholder) in &self.names {
            out = out.replace(name.as_str(), placeholder);
        }
        if out.starts_with("arn:") {
            return "<arn>".to_owned();
        }
        if out.contains(".elb.") || out.ends_with(".amazonaws.com") {
            return "<dns-name>".to_owned();
        }
        if let Some(port) = self.node_port
            && out == port.to_string()
        {
            return "<node-port>".to_owned();
        }
        out
    }
}

fn strings(value: &Value) -> impl Iterator<Item = (&String, &str)> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k, v.as_str()?)))
}

fn node_facts(node: &Value, places: &Placeholders, out: &mut Outcome) {
    for (key, value) in strings(&node["metadata"]["labels"]) {
        out.insert(format!("node label {key}"), places.apply(value));
    }
    for (key, value) in strings(&node["metadata"]["annotations"]) {
        out.insert(format!("node annotation {key}"), places.apply(value));
    }
    let listed = |path: &Value, field: &str| -> Vec<String> {
        path.as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item[field].as_str().map(str::to_owned))
            .collect()
    };
    out.insert(
        "node address types".into(),
        listed(&node["status"]["addresses"], "type").join(","),
    );
    let taints: BTreeSet<String> = listed(&node["spec"]["taints"], "key").into_iter().collect();
    out.insert(
        "node taints".into(),
        taints.into_iter().collect::<Vec<_>>().join(","),
    );
    out.insert(
        "node providerID".into(),
        places.apply(node["spec"]["providerID"].as_str().unwrap_or("")),
    );
    for condition in node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let kind = condition["type"].as_str().unwrap_or("?");
        out.insert(
            format!("node condition {kind}"),
            format!(
                "{} {}",
                condition["status"].as_str().unwrap_or("?"),
                condition["reason"].as_str().unwrap_or("")
            ),
        );
    }
}

fn service_facts(service: &Value, places: &Placeholders, out: &mut Outcome) {
    for (key, value) in strings(&service["metadata"]["annotations"]) {
        out.insert(format!("service annotation {key}"), places.apply(value));
    }
    let finalizers: Vec<&str> = service["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    out.insert("service finalizers".into(), finalizers.join(","));
    for (n, ingress) in service["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (key, value) in ingress.as_object().into_iter().flatten() {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            out.insert(format!("service ingress {n} {key}"), places.apply(&value));
        }
    }
}

async fn cloud_facts(
    from: &Sources<'_>,
    lbs: &[aws_sdk_elasticloadbalancingv2::types::LoadBalancer],
    places: &Placeholders,
    out: &mut Outcome,
) -> anyhow::Result<()> {
    let elbv2 = from.elbv2;
    out.insert("load balancers".into(), lbs.len().to_string());
    for lb in lbs {
        let arn = lb.load_balancer_arn().unwrap_or_default();
        out.insert("lb type".into(), format!("{:?}", lb.r#type()));
        out.insert("lb scheme".into(), format!("{:?}", lb.scheme()));
        out.insert(
            "lb ip address type".into(),
            format!("{:?}", lb.ip_address_type()),
        );
        out.insert(
            "lb security groups".into(),
            lb.security_groups().len().to_string(),
        );
        out.insert(
            "lb subnets".into(),
            lb.availability_zones().len().to_string(),
        );
        let attributes = elbv2
            .describe_load_balancer_attributes()
            .load_balancer_arn(arn)
            .send()
            .await?;
        for a in attributes.attributes() {
            out.insert(
                format!("lb attribute {}", a.key().unwrap_or("?")),
                places.apply(a.value().unwrap_or("")),
            );
        }
        tags(elbv2, "lb", arn, places, out).await?;
        let listeners = elbv2
            .describe_listeners()
            .load_balancer_arn(arn)
            .send()
            .await?;
        for l in listeners.listeners() {
            let port = l.port().unwrap_or_default();
            out.insert(format!("listener {port}"), format!("{:?}", l.protocol()));
        }
        let groups = elbv2
            .describe_target_groups()
            .load_balancer_arn(arn)
            .send()
            .await?;
        for tg in groups.target_groups() {
            target_group_facts(elbv2, tg, places, out).await?;
        }
    }
    security_group_facts(from, places, out).await?;
    let tables = from
        .ec2
        .describe_route_tables()
        .filters(
            Filter::builder()
                .name("route-table-id")
                .values(&from.estate.route_table)
                .build(),
        )
        .send()
        .await
        .context("reading the route table")?;
    let to_instances = tables
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter(|r| r.instance_id().is_some())
        .count();
    out.insert("routes to instances".into(), to_instances.to_string());
    let described = from
        .ec2
        .describe_instance_attribute()
        .instance_id(&from.estate.instances[0].id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::SourceDestCheck)
        .send()
        .await?;
    out.insert(
        "instance source/destination check".into(),
        format!(
            "{:?}",
            described.source_dest_check().and_then(|v| v.value())
        ),
    );
    Ok(())
}

async fn target_group_facts(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    tg: &aws_sdk_elasticloadbalancingv2::types::TargetGroup,
    places: &Placeholders,
    out: &mut Outcome,
) -> anyhow::Result<()> {
    let arn = tg.target_group_arn().unwrap_or_default();
    let facts = [
        ("protocol", format!("{:?}", tg.protocol())),
        (
            "port",
            places.apply(&tg.port().unwrap_or_default().to_string()),
        ),
        ("target type", format!("{:?}", tg.target_type())),
        (
            "health check protocol",
            format!("{:?}", tg.health_check_protocol()),
        ),
        (
            "health check port",
            places.apply(tg.health_check_port().unwrap_or("")),
        ),
        (
            "health check path",
            tg.health_check_path().unwrap_or("").to_owned(),
        ),
        (
            "health check interval",
            format!("{:?}", tg.health_check_interval_seconds()),
        ),
        (
            "health check timeout",
            format!("{:?}", tg.health_check_timeout_seconds()),
        ),
        (
            "healthy threshold",
            format!("{:?}", tg.healthy_threshold_count()),
        ),
        (
            "unhealthy threshold",
            format!("{:?}", tg.unhealthy_threshold_count()),
        ),
    ];
    for (key, value) in facts {
        out.insert(format!("tg {key}"), value);
    }
    let attributes = elbv2
        .describe_target_group_attributes()
        .target_group_arn(arn)
        .send()
        .await?;
    for a in attributes.attributes() {
        out.insert(
            format!("tg attribute {}", a.key().unwrap_or("?")),
            places.apply(a.value().unwrap_or("")),
        );
    }
    let health = elbv2
        .describe_target_health()
        .target_group_arn(arn)
        .send()
        .await?;
    out.insert(
        "tg targets".into(),
        health.target_health_descriptions().len().to_string(),
    );
    tags(elbv2, "tg", arn, places, out).await
}

async fn tags(
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    what: &str,
    arn: &str,
    places: &Placeholders,
    out: &mut Outcome,
) -> anyhow::Result<()> {
    let described = elbv2.describe_tags().resource_arns(arn).send().await?;
    for tag in described.tag_descriptions().iter().flat_map(|d| d.tags()) {
        out.insert(
            format!("{what} tag {}", tag.key().unwrap_or("?")),
            places.apply(tag.value().unwrap_or("")),
        );
    }
    Ok(())
}

/// Security groups made beyond the seeded node group, and the node group's
/// rules.
async fn security_group_facts(
    from: &Sources<'_>,
    places: &Placeholders,
    out: &mut Outcome,
) -> anyhow::Result<()> {
    let groups = from
        .ec2
        .describe_security_groups()
        .filters(
            Filter::builder()
                .name("vpc-id")
                .values(&from.estate.vpc)
                .build(),
        )
        .send()
        .await?;
    let made: Vec<_> = groups
        .security_groups()
        .iter()
        .filter(|g| g.group_id() != Some(from.estate.node_security_group.as_str()))
        .filter(|g| g.group_name() != Some("default"))
        .collect();
    out.insert("security groups made".into(), made.len().to_string());
    for group in &made {
        for tag in group.tags() {
            out.insert(
                format!("sg tag {}", tag.key().unwrap_or("?")),
                places.apply(tag.value().unwrap_or("")),
            );
        }
    }
    let node_group = groups
        .security_groups()
        .iter()
        .find(|g| g.group_id() == Some(from.estate.node_security_group.as_str()));
    let mut rules = BTreeSet::new();
    for permission in node_group.into_iter().flat_map(|g| g.ip_permissions()) {
        let port =
            |p: Option<i32>| p.map_or_else(|| "any".to_owned(), |p| places.apply(&p.to_string()));
        let ports = format!(
            "{} {}-{}",
            permission.ip_protocol().unwrap_or("?"),
            port(permission.from_port()),
            port(permission.to_port())
        );
        for range in permission.ip_ranges() {
            rules.insert(format!(
                "{ports} from {} ({})",
                range.cidr_ip().unwrap_or("?"),
                places.apply(range.description().unwrap_or(""))
            ));
        }
        for pair in permission.user_id_group_pairs() {
            rules.insert(format!(
                "{ports} from a security group ({})",
                places.apply(pair.description().unwrap_or(""))
            ));
        }
    }
    for rule in rules {
        out.insert(format!("node sg rule {rule}"), "present".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_specific_names_become_placeholders() {
        let places = Placeholders {
            names: vec![
                ("ip-10-0-0-12.ec2.internal".to_owned(), "<node>"),
                ("i-0abc".to_owned(), "<instance>"),
            ],
            node_port: Some(31000),
        };
        assert_eq!(
            places.apply("aws:///us-east-1a/i-0abc"),
            "aws:///us-east-1a/<instance>"
        );
        assert_eq!(places.apply("ip-10-0-0-12.ec2.internal"), "<node>");
        assert_eq!(places.apply("arn:aws:elasticloadbalancing:x"), "<arn>");
        assert_eq!(places.apply("31000"), "<node-port>");
        assert_eq!(places.apply("traffic-port"), "traffic-port");
    }
}
