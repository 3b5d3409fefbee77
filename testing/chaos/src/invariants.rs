//! What "converged" means for a suite: exactly one load balancer per
//! Service that needs one and none for any other, each sending traffic to
//! every node, the Service's status and finalizer in step with it, and
//! routes equal to the nodes' pod CIDRs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ccm_test_support::{has_load_balancer_finalizer, service_key, wants_load_balancer};

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::ListParams;

use crate::cloud::{CloudProcess, CloudState};
use crate::env::CLUSTER;

/// How often convergence is checked.
const POLL: Duration = Duration::from_millis(200);

/// Everything out of place, one line each, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Load balancers no Service needs.
    pub(crate) leaked: Vec<String>,
    /// Services with more than one load balancer.
    pub(crate) duplicated: Vec<String>,
    /// Anything else: a missing or stale load balancer, status, finalizer
    /// or route.
    pub(crate) inconsistent: Vec<String>,
}

impl Verdict {
    pub(crate) fn converged(&self) -> bool {
        self.leaked.is_empty() && self.duplicated.is_empty() && self.inconsistent.is_empty()
    }
}

/// The cloud name of `service`'s load balancer: the fake cloud names them
/// as upstream does, from the UID.
fn expected_name(service: &Service) -> String {
    ccm_cloud_provider::default_load_balancer_name(service)
}

fn ingress_ip(service: &Service) -> Option<&str> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .as_deref()
}

/// Judges `cloud` against the `services` and `nodes` of the API.
pub(crate) fn judge(services: &[Service], nodes: &[Node], cloud: &CloudState) -> Verdict {
    let mut verdict = Verdict::default();
    let node_names: Vec<String> = {
        let mut names: Vec<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        names.sort();
        names
    };
    let wanted: BTreeMap<String, &Service> = services
        .iter()
        .filter(|s| wants_load_balancer(s))
        .map(|s| (service_key(s), s))
        .collect();
    let mut found: BTreeMap<&str, Vec<&crate::cloud::CloudLoadBalancer>> = BTreeMap::new();
    for lb in &cloud.load_balancers {
        found.entry(lb.service.as_str()).or_default().push(lb);
    }
    for (service_key, lbs) in &found {
        let Some(service) = wanted.get(*service_key) else {
            for lb in lbs {
                verdict
                    .leaked
                    .push(format!("{} for {service_key}, which needs none", lb.name));
            }
            continue;
        };
        let expected = expected_name(service);
        for lb in lbs.iter().filter(|lb| lb.name != expected) {
            verdict
                .leaked
                .push(format!("{} for an earlier {service_key}", lb.name));
        }
        if lbs.iter().filter(|lb| lb.name == expected).count() > 1 {
            verdict.duplicated.push((*service_key).to_owned());
        }
    }
    for (service_key, service) in &wanted {
        let expected = expected_name(service);
        let Some(lb) = cloud.load_balancers.iter().find(|lb| lb.name == expected) else {
            verdict
                .inconsistent
                .push(format!("{service_key} has no load balancer"));
            continue;
        };
        if lb.nodes != node_names {
            verdict.inconsistent.push(format!(
                "{service_key}'s load balancer sends to {:?}, not {node_names:?}",
                lb.nodes
            ));
        }
        if ingress_ip(service) != Some(lb.ip.as_str()) {
            verdict.inconsistent.push(format!(
                "{service_key}'s status says {:?}, its load balancer has {}",
                ingress_ip(service),
                lb.ip
            ));
        }
        if !has_load_balancer_finalizer(service) {
            verdict.inconsistent.push(format!(
                "{service_key} has a load balancer but no finalizer"
            ));
        }
    }
    for service in services.iter().filter(|s| !wants_load_balancer(s)) {
        if has_load_balancer_finalizer(service) {
            verdict.inconsistent.push(format!(
                "{} keeps the finalizer without a load balancer",
                service_key(service)
            ));
        }
    }
    let routes: BTreeSet<(String, String)> = cloud
        .routes
        .iter()
        .filter(|r| r.cluster == CLUSTER)
        .map(|r| (r.cidr.clone(), r.node.clone()))
        .collect();
    let wanted_routes: BTreeSet<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            let cidr = n.spec.as_ref()?.pod_cidr.clone()?;
            Some((cidr, n.metadata.name.clone()?))
        })
        .collect();
    for extra in routes.difference(&wanted_routes) {
        verdict
            .inconsistent
            .push(format!("route {extra:?} has no node"));
    }
    for missing in wanted_routes.difference(&routes) {
        verdict
            .inconsistent
            .push(format!("route {missing:?} is missing"));
    }
    verdict
}

/// The verdict on the API and the cloud now.
pub(crate) async fn check(client: &kube::Client, cloud: &CloudProcess) -> anyhow::Result<Verdict> {
    let services: Api<Service> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let services = services.list(&ListParams::default()).await?.items;
    let nodes = nodes.list(&ListParams::default()).await?.items;
    let state = cloud.state().await?;
    Ok(judge(&services, &nodes, &state))
}

/// Waits up to `timeout` for convergence: how long it took, or the last
/// verdict when it never came.
pub(crate) async fn converge(
    client: &kube::Client,
    cloud: &CloudProcess,
    timeout: Duration,
) -> anyhow::Result<Result<Duration, Verdict>> {
    let start = Instant::now();
    loop {
        let verdict = check(client, cloud).await?;
        if verdict.converged() {
            return Ok(Ok(start.elapsed()));
        }
        if start.elapsed() >= timeout {
            return Ok(Err(verdict));
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{CloudLoadBalancer, CloudRoute};
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, NodeSpec, ServiceSpec, ServiceStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const UID: &str = "11111111-2222-3333-4444-555555555555";

    fn service(name: &str, uid: &str, lb: bool, ip: Option<&str>) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                finalizers: lb.then(|| vec![ccm_test_support::LOAD_BALANCER_FINALIZER.to_owned()]),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(if lb { "LoadBalancer" } else { "ClusterIP" }.into()),
                ..ServiceSpec::default()
            }),
            status: ip.map(|ip| ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(vec![LoadBalancerIngress {
                        ip: Some(ip.into()),
                        ..LoadBalancerIngress::default()
                    }]),
                }),
                ..ServiceStatus::default()
            }),
        }
    }

    fn node(name: &str, cidr: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                pod_cidr: Some(cidr.into()),
                ..NodeSpec::default()
            }),
            status: None,
        }
    }

    fn lb(name: &str, service: &str) -> CloudLoadBalancer {
        CloudLoadBalancer {
            name: name.into(),
            service: service.into(),
            nodes: vec!["n1".into()],
            ip: "192.0.2.1".into(),
        }
    }

    fn route(cidr: &str, node: &str) -> CloudRoute {
        CloudRoute {
            cluster: CLUSTER.into(),
            cidr: cidr.into(),
            node: node.into(),
        }
    }

    #[test]
    fn a_matching_world_has_converged() {
        let services = [
            service("web", UID, true, Some("192.0.2.1")),
            service("db", "x", false, None),
        ];
        let nodes = [node("n1", "10.244.1.0/24")];
        let cloud = CloudState {
            load_balancers: vec![lb(&expected_name(&services[0]), "default/web")],
            routes: vec![route("10.244.1.0/24", "n1")],
        };
        let verdict = judge(&services, &nodes, &cloud);
        assert!(verdict.converged(), "{verdict:?}");
    }

    #[test]
    fn leaks_duplicates_and_inconsistencies_are_each_named() {
        let services = [
            service("web", UID, true, None),
            service("db", "x", false, None),
        ];
        let nodes = [node("n1", "10.244.1.0/24"), node("n2", "10.244.2.0/24")];
        let cloud = CloudState {
            load_balancers: vec![
                lb(&expected_name(&services[0]), "default/web"),
                lb(&expected_name(&services[0]), "default/web"),
                lb("aold", "default/web"),
                lb("adb", "default/db"),
            ],
            routes: vec![route("10.244.1.0/24", "n1"), route("10.244.9.0/24", "n9")],
        };
        let verdict = judge(&services, &nodes, &cloud);
        assert_eq!(verdict.leaked.len(), 2, "{verdict:?}");
        assert_eq!(verdict.duplicated, ["default/web"]);
        let text = verdict.inconsistent.join("\n");
        for expected in ["sends to", "status says", "has no node", "is missing"] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
    }
}
