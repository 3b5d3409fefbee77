//! What is leaked and what is missing: the provider's owned resources
//! matched against the cluster's Services and Nodes.

use std::collections::BTreeSet;

use ccm_cloud_provider::{CloudProvider, OwnedResource, Owner};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, Service};
use serde::Serialize;

/// A resource nobody owns, and why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Leak {
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) reason: String,
    #[serde(skip)]
    pub(crate) resource: OwnedResource,
}

/// A Service whose recorded load balancer is gone.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Missing {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The addresses its status still records.
    pub(crate) ingress: Vec<String>,
}

/// What the audit found.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Findings {
    pub(crate) leaked: Vec<Leak>,
    pub(crate) missing: Vec<Missing>,
    /// Routes not audited: outside `--cluster-cidr`, or no `--cluster-cidr`.
    pub(crate) routes_not_audited: usize,
}

fn key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A Service the service controller owns a load balancer for: it wants
/// one, or it still carries the cleanup finalizer (the CCM deletes that
/// load balancer itself).
fn owns_load_balancer(service: &Service) -> bool {
    ccm_controllers::wants_load_balancer(service) || ccm_controllers::has_finalizer(service)
}

fn ingress(service: &Service) -> Vec<String> {
    let status = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref());
    status
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
        .collect()
}

/// Matches `owned` against `services` and `nodes`.
pub(crate) fn classify(
    cloud: &dyn CloudProvider,
    cluster: &str,
    cluster_cidrs: &[IpNet],
    owned: Vec<OwnedResource>,
    services: &[Service],
    nodes: &[Node],
) -> Findings {
    let lb_name = |service: &Service| match cloud.load_balancer() {
        Some(lb) => lb.load_balancer_name(cluster, service),
        None => ccm_cloud_provider::default_load_balancer_name(service),
    };
    let owners: Vec<&Service> = services.iter().filter(|s| owns_load_balancer(s)).collect();
    let names: BTreeSet<String> = owners.iter().map(|s| lb_name(s)).collect();
    let keys: BTreeSet<String> = owners.iter().map(|s| key(s)).collect();
    let mut findings = Findings::default();
    let mut balanced = BTreeSet::new();
    for resource in owned {
        if resource.kind == OwnedResource::LOAD_BALANCER {
            balanced.insert(resource.owner.clone());
        }
        let reason = match &resource.owner {
            Owner::Cluster => None,
            Owner::LoadBalancerName(name) => (!names.contains(name))
                .then(|| format!("no Service's load balancer is named {name}")),
            Owner::Service { namespace, name } => (!keys.contains(&format!("{namespace}/{name}")))
                .then(|| format!("Service {namespace}/{name} is gone or wants no load balancer")),
            Owner::Node(node) => match route_verdict(&resource, node, cluster_cidrs, nodes) {
                RouteVerdict::NotAudited => {
                    findings.routes_not_audited += 1;
                    None
                }
                RouteVerdict::Owned => None,
                RouteVerdict::Leaked(reason) => Some(reason),
            },
        };
        if let Some(reason) = reason {
            findings.leaked.push(Leak {
                kind: resource.kind.clone(),
                id: resource.id.clone(),
                name: resource.name.clone(),
                reason,
                resource,
            });
        }
    }
    for service in services
        .iter()
        .filter(|s| ccm_controllers::wants_load_balancer(s))
    {
        let recorded = ingress(service);
        let by_name = Owner::LoadBalancerName(lb_name(service));
        let by_key = Owner::Service {
            namespace: service.metadata.namespace.clone().unwrap_or_default(),
            name: service.metadata.name.clone().unwrap_or_default(),
        };
        if !recorded.is_empty() && !balanced.contains(&by_name) && !balanced.contains(&by_key) {
            findings.missing.push(Missing {
                namespace: service.metadata.namespace.clone().unwrap_or_default(),
                name: service.metadata.name.clone().unwrap_or_default(),
                ingress: recorded,
            });
        }
    }
    findings
}

enum RouteVerdict {
    NotAudited,
    Owned,
    Leaked(String),
}

/// A resource owned by a node: a route is audited only inside the
/// cluster's pod network (`--cluster-cidr`), as the route controller only
/// ever deletes routes there; anything else a node owns is owned while the
/// node exists.
fn route_verdict(
    resource: &OwnedResource,
    node: &str,
    cluster_cidrs: &[IpNet],
    nodes: &[Node],
) -> RouteVerdict {
    // As the route controller matches routes to nodes: by name, or by
    // provider ID where the cloud knows the target's.
    let found = nodes
        .iter()
        .find(|n| ccm_controllers::route_goes_to_node(node, resource.provider_id.as_deref(), n));
    let Some(cidr) = &resource.cidr else {
        return match found {
            Some(_) => RouteVerdict::Owned,
            None => RouteVerdict::Leaked(format!("node {node} is gone")),
        };
    };
    let Ok(net) = cidr.parse::<IpNet>() else {
        return RouteVerdict::NotAudited;
    };
    if !cluster_cidrs.iter().any(|c| c.contains(&net)) {
        return RouteVerdict::NotAudited;
    }
    let Some(found) = found else {
        return RouteVerdict::Leaked(match &resource.provider_id {
            Some(id) => format!("no node is named {node} or has provider ID {id}"),
            None => format!("node {node} is gone"),
        });
    };
    let spec = found.spec.as_ref();
    let pod_cidrs: Vec<&str> = spec
        .and_then(|s| s.pod_cidrs.as_ref())
        .into_iter()
        .flatten()
        .map(String::as_str)
        .chain(spec.and_then(|s| s.pod_cidr.as_deref()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if pod_cidrs
        .iter()
        .any(|p| p.parse::<IpNet>().is_ok_and(|p| p == net))
    {
        RouteVerdict::Owned
    } else {
        RouteVerdict::Leaked(format!(
            "node {}'s pod CIDRs are [{}], not {cidr}",
            found.metadata.name.as_deref().unwrap_or(node),
            pod_cidrs.join(", ")
        ))
    }
}
