//! What "converged" means on AWS: exactly one Network Load Balancer per
//! Service that needs one and nothing of a load balancer (its target
//! groups, its security group) for any other; each listener on a Service
//! port, forwarding to a target group that holds every node on the
//! Service's node port; the Service's status and finalizer in step; the
//! route table's instance routes equal to the nodes' pod CIDRs.

use std::collections::{BTreeMap, BTreeSet};

use ccm_cloud_provider::default_load_balancer_name;
use ccm_provider_aws::SERVICE_NAME_TAG;
use ccm_provider_aws::test_util::seed::Estate;
use ccm_test_support::{
    has_load_balancer_finalizer, ingress_hostnames, service_key, wants_load_balancer,
};
use k8s_openapi::api::core::v1::{Node, Service};

use crate::support::aws;
use crate::support::objects::node_port;

/// Everything out of place, one line each, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Load balancers, target groups and security groups no Service needs.
    pub(crate) leaked: Vec<String>,
    /// Services with more than one load balancer or security group.
    pub(crate) duplicated: Vec<String>,
    /// Anything else out of place.
    pub(crate) inconsistent: Vec<String>,
}

impl Verdict {
    pub(crate) fn converged(&self) -> bool {
        self.leaked.is_empty() && self.duplicated.is_empty() && self.inconsistent.is_empty()
    }

    pub(crate) fn lines(&self) -> impl Iterator<Item = &String> {
        self.leaked
            .iter()
            .chain(&self.duplicated)
            .chain(&self.inconsistent)
    }
}

fn ports(service: &Service) -> Vec<i32> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| ports.iter().map(|p| p.port).collect())
        .unwrap_or_default()
}

/// Reads moto and judges it against the `services` and `nodes` of the API.
pub(crate) async fn check(
    ec2: &aws_sdk_ec2::Client,
    elbv2: &aws_sdk_elasticloadbalancingv2::Client,
    estate: &Estate,
    services: &[Service],
    nodes: &[Node],
) -> anyhow::Result<Verdict> {
    let mut verdict = Verdict::default();
    let wanted: BTreeMap<String, &Service> = services
        .iter()
        .filter(|s| wants_load_balancer(s))
        .map(|s| (service_key(s), s))
        .collect();
    let instance_of: BTreeMap<&str, &str> = estate
        .instances
        .iter()
        .map(|i| (i.private_dns_name.as_str(), i.id.as_str()))
        .collect();
    let node_instances: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| instance_of.get(n.metadata.name.as_deref()?))
        .map(|id| (*id).to_owned())
        .collect();

    // Load balancers, by the Service their tag names.
    let mut kept_arns = BTreeSet::new();
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut by_name = BTreeMap::new();
    for lb in aws::load_balancers(elbv2).await? {
        let arn = lb.load_balancer_arn().unwrap_or_default().to_owned();
        let name = lb.load_balancer_name().unwrap_or_default().to_owned();
        let tags = aws::tags(elbv2, &arn).await?;
        let Some(service) = tags.get(SERVICE_NAME_TAG) else {
            verdict
                .leaked
                .push(format!("load balancer {name} without a Service tag"));
            continue;
        };
        match wanted.get(service) {
            Some(s) if default_load_balancer_name(s) == name => {
                kept_arns.insert(arn.clone());
                found.entry(service.clone()).or_default().push(name.clone());
                by_name.insert(name, lb);
            }
            Some(_) => verdict
                .leaked
                .push(format!("load balancer {name} for an earlier {service}")),
            None => verdict.leaked.push(format!(
                "load balancer {name} for {service}, which needs none"
            )),
        }
    }
    for (service, names) in &found {
        if names.len() > 1 {
            verdict
                .duplicated
                .push(format!("{service}: load balancers {names:?}"));
        }
    }

    // Target groups: each behind a load balancer that is kept.
    for tg in aws::target_groups(elbv2).await? {
        let attached = tg.load_balancer_arns();
        if attached.is_empty() || !attached.iter().all(|a| kept_arns.contains(a)) {
            verdict.leaked.push(format!(
                "target group {} (behind {attached:?})",
                tg.target_group_name().unwrap_or_default()
            ));
        }
    }

    // The load balancers' security groups.
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for group in aws::security_groups(ec2, &estate.vpc).await? {
        let Some(service) = group
            .tags()
            .iter()
            .find(|t| t.key() == Some(SERVICE_NAME_TAG))
            .and_then(|t| t.value())
        else {
            continue;
        };
        let name = group.group_name().unwrap_or_default().to_owned();
        if wanted.contains_key(service) {
            groups.entry(service.to_owned()).or_default().push(name);
        } else {
            verdict.leaked.push(format!(
                "security group {name} for {service}, which needs none"
            ));
        }
    }
    for (service, names) in &groups {
        if names.len() > 1 {
            verdict
                .duplicated
                .push(format!("{service}: security groups {names:?}"));
        }
    }

    // Each wanted Service: its load balancer in shape, its status and
    // finalizer.
    for (service_key, service) in &wanted {
        let name = default_load_balancer_name(service);
        let Some(lb) = by_name.get(&name) else {
            verdict
                .inconsistent
                .push(format!("{service_key} has no load balancer {name}"));
            continue;
        };
        let dns = lb.dns_name().unwrap_or_default();
        if ingress_hostnames(service) != [dns.to_owned()] {
            verdict.inconsistent.push(format!(
                "{service_key}'s ingress is {:?}, not {dns}",
                ingress_hostnames(service)
            ));
        }
        if !has_load_balancer_finalizer(service) {
            verdict.inconsistent.push(format!(
                "{service_key} has a load balancer and no finalizer"
            ));
        }
        let arn = lb.load_balancer_arn().unwrap_or_default();
        let mut listening = BTreeSet::new();
        for listener in aws::listeners(elbv2, arn).await? {
            let port = listener.port().unwrap_or_default();
            listening.insert(port);
            let Some(tg) = listener
                .default_actions()
                .iter()
                .find_map(|a| a.target_group_arn())
            else {
                verdict
                    .inconsistent
                    .push(format!("{service_key}: listener {port} forwards nowhere"));
                continue;
            };
            let node_port = node_port(service, port).unwrap_or_default();
            let want: BTreeSet<(String, i32)> = node_instances
                .iter()
                .map(|id| (id.clone(), node_port))
                .collect();
            let have = aws::targets(elbv2, tg).await?;
            if have != want {
                verdict.inconsistent.push(format!(
                    "{service_key}: listener {port} targets {have:?}, not {want:?}"
                ));
            }
        }
        let want: BTreeSet<i32> = ports(service).into_iter().collect();
        if listening != want {
            verdict.inconsistent.push(format!(
                "{service_key}: listeners on {listening:?}, not {want:?}"
            ));
        }
    }
    for service in services.iter().filter(|s| !wants_load_balancer(s)) {
        if service.metadata.deletion_timestamp.is_some() {
            verdict
                .inconsistent
                .push(format!("{} is still being deleted", service_key(service)));
        } else if has_load_balancer_finalizer(service) {
            verdict.inconsistent.push(format!(
                "{} needs no load balancer and keeps the finalizer",
                service_key(service)
            ));
        }
        if !ingress_hostnames(service).is_empty() {
            verdict.inconsistent.push(format!(
                "{} needs no load balancer and has an ingress",
                service_key(service)
            ));
        }
    }

    // Routes.
    let want_routes: BTreeSet<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            let cidr = n.spec.as_ref()?.pod_cidr.clone()?;
            let id = instance_of.get(n.metadata.name.as_deref()?)?;
            Some((cidr, (*id).to_owned()))
        })
        .collect();
    let have_routes = aws::instance_routes(ec2, &estate.route_table).await?;
    if have_routes != want_routes {
        verdict
            .inconsistent
            .push(format!("routes {have_routes:?}, not {want_routes:?}"));
    }
    Ok(verdict)
}
