//! Load balancers as upstream's Rancher CCM makes them: a
//! `LoadBalancerService` named `lb-<upstream's load-balancer name>` in the
//! `kubernetes-loadbalancers` stack, listening on `<port>:<port>/tcp` for
//! each Service port, with one port rule per port and node sending to that
//! node's `ExternalService` (named after its hostname, shared by every load
//! balancer) on the node port. Its ingress is its public endpoints' IPs.
//!
//! What differs from upstream:
//! - A load balancer upstream made is adopted as it is: no create, and the
//!   first update records the owning cluster and Service in its `metadata`
//!   (`kubernetes-cluster`, `kubernetes-service`). One recorded for another
//!   cluster is never touched.
//! - Every wait is bounded (a few seconds) and cancellable; what is not
//!   ready by then is a `Retry`, and the next call carries on. Upstream
//!   polls up to a minute per step and blocks its worker.
//! - A node set change adds and removes only the external services that
//!   changed; upstream deletes all of them and makes them again.
//! - Offline checks refuse what Rancher cannot do (UDP, a chosen
//!   `loadBalancerIP`, session affinity) before any call.

mod converge;
mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancer, LoadBalancerIngress, LoadBalancerStatus,
    default_load_balancer_name,
};

use crate::RancherProvider;
use crate::cattle::LoadBalancerService;

/// The `metadata` key naming the cluster that owns a load balancer.
pub const CLUSTER_KEY: &str = "kubernetes-cluster";
/// The `metadata` key naming the Service (`namespace/name`) it serves.
pub const SERVICE_KEY: &str = "kubernetes-service";

/// How long a call waits, in all, for Rancher to finish a transition
/// before answering `Retry`: the pauses between reloads.
const PAUSES_MS: [u64; 5] = [100, 200, 400, 800, 1500];
/// When the controller tries again after that.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// Upstream's name for `service`'s load balancer: `lb-` and
/// [`default_load_balancer_name`].
pub fn load_balancer_name(service: &Service) -> String {
    format!("lb-{}", default_load_balancer_name(service))
}

/// Upstream's name for the external service of node `hostname`
/// (`buildExternalServiceName`): characters other than letters, digits and
/// `-` become `-`, leading and trailing `-` go, runs of `-` become one, and
/// the result is cut to 63 characters.
pub fn external_service_name(hostname: &str) -> String {
    let replaced: String = hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut out = String::with_capacity(replaced.len());
    for c in replaced.trim_matches('-').chars() {
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out.truncate(63);
    out
}

/// What a Service asks of its load balancer, checked before any call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub(crate) name: String,
    /// `<namespace>/<name>`.
    pub(crate) owner: String,
    /// `launchConfig.ports`, sorted.
    pub(crate) ports: Vec<String>,
    /// Each Service port and its node port.
    pub(crate) forwards: Vec<(i64, i64)>,
}

fn wanted(service: &Service) -> Result<Wanted, CloudError> {
    let spec = service.spec.as_ref();
    if spec
        .and_then(|s| s.load_balancer_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty())
    {
        return Err(CloudError::invalid(
            "spec.loadBalancerIP",
            "Rancher cannot give a load balancer a chosen address: leave it empty",
        ));
    }
    if let Some(affinity) = spec.and_then(|s| s.session_affinity.as_deref())
        && affinity != "None"
    {
        return Err(CloudError::invalid(
            "spec.sessionAffinity",
            format!("{affinity} is not supported by Rancher's TCP load balancers: use None"),
        ));
    }
    let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
    if ports.is_empty() {
        return Err(CloudError::invalid(
            "spec.ports",
            "a LoadBalancer Service needs a port",
        ));
    }
    let mut forwards = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter().enumerate() {
        let protocol = p.protocol.as_deref().unwrap_or("TCP");
        if protocol != "TCP" {
            return Err(CloudError::invalid(
                format!("spec.ports[{i}].protocol"),
                format!("{protocol} is not supported: Rancher's load balancers forward TCP"),
            ));
        }
        let node_port = p.node_port.filter(|n| *n > 0).ok_or_else(|| {
            CloudError::invalid(format!("spec.ports[{i}].nodePort"), "not allocated yet")
        })?;
        forwards.push((i64::from(p.port), i64::from(node_port)));
    }
    let mut listen: Vec<String> = forwards
        .iter()
        .map(|(port, _)| format!("{port}:{port}/tcp"))
        .collect();
    listen.sort();
    listen.dedup();
    let m = &service.metadata;
    Ok(Wanted {
        name: load_balancer_name(service),
        owner: format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or("default"),
            m.name.as_deref().unwrap_or_default()
        ),
        ports: listen,
        forwards,
    })
}

/// The cluster a load balancer's metadata names, if any.
fn recorded_cluster(lb: &LoadBalancerService) -> Option<&str> {
    lb.metadata.as_ref()?.get(CLUSTER_KEY)?.as_str()
}

fn status(lb: &LoadBalancerService) -> LoadBalancerStatus {
    let mut ips: Vec<&str> = lb
        .public_endpoints
        .iter()
        .flatten()
        .map(|e| e.ip_address.as_str())
        .filter(|ip| !ip.is_empty())
        .collect();
    ips.sort_unstable();
    ips.dedup();
    LoadBalancerStatus {
        ingress: ips
            .into_iter()
            .map(|ip| LoadBalancerIngress {
                ip: Some(ip.to_owned()),
                ..LoadBalancerIngress::default()
            })
            .collect(),
    }
}

fn ports_changed(lb: &LoadBalancerService, wanted: &Wanted) -> bool {
    let mut ports = lb
        .launch_config
        .as_ref()
        .map(|c| c.ports.clone())
        .unwrap_or_default();
    ports.sort();
    ports.dedup();
    ports != wanted.ports
}

impl RancherProvider {
    /// The load balancer called `name`, if one exists.
    async fn find(&self, name: &str) -> Result<Option<LoadBalancerService>, CloudError> {
        let found: Vec<LoadBalancerService> = self
            .client
            .list(
                "loadbalancerservices",
                &[("name", name), ("removed_null", "1")],
            )
            .await?;
        let mut found = found.into_iter().filter(|lb| lb.lifecycle.in_play());
        let first = found.next();
        if found.next().is_some() {
            return Err(CloudError::msg(format!(
                "several Rancher load balancers are named {name}: left alone"
            )));
        }
        Ok(first)
    }

    /// This cluster's load balancer called `name`: `Err` when the one of
    /// that name is recorded for another cluster.
    async fn find_ours(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<LoadBalancerService>, CloudError> {
        match self.find(name).await? {
            Some(lb) => match recorded_cluster(&lb) {
                Some(other) if other != cluster => Err(CloudError::msg(format!(
                    "Rancher load balancer {name} belongs to cluster {other}: left alone"
                ))),
                _ => Ok(Some(lb)),
            },
            None => Ok(None),
        }
    }

    /// Reloads `lb` until `ready` says so, for a few seconds at most.
    async fn wait_for(
        &self,
        mut lb: LoadBalancerService,
        what: &str,
        ready: impl Fn(&LoadBalancerService) -> bool,
    ) -> Result<LoadBalancerService, CloudError> {
        // A dry run's stand-in never gets there; nothing is read by it.
        if crate::api::is_planned(&lb.resource.id) {
            return Ok(lb);
        }
        for pause in PAUSES_MS {
            if ready(&lb) {
                return Ok(lb);
            }
            tokio::time::sleep(Duration::from_millis(pause)).await;
            lb = self.client.reload(&lb.resource).await?.ok_or_else(|| {
                CloudError::msg(format!("Rancher load balancer {} vanished", lb.name))
            })?;
        }
        if ready(&lb) {
            return Ok(lb);
        }
        Err(CloudError::Retry {
            after: RETRY_AFTER,
            reason: format!(
                "Rancher load balancer {} is {}: waiting for {what}",
                lb.name, lb.lifecycle.state
            ),
        })
    }
}

#[async_trait]
impl LoadBalancer for RancherProvider {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let name = load_balancer_name(service);
        Ok(self
            .find(&name)
            .await?
            .filter(|lb| recorded_cluster(lb).is_none_or(|c| c == cluster_name))
            .as_ref()
            .map(status))
    }

    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        Some(wanted(service).map(drop))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        let wanted = wanted(service)?;
        let mut found = self.find_ours(cluster_name, &wanted.name).await?;
        let mut removed = Vec::new();
        if let Some(lb) = found.as_ref().filter(|lb| ports_changed(lb, &wanted)) {
            // Rancher cannot change a load balancer's ports: upstream
            // deletes it and makes a new one, and so does this.
            tracing::info!(name = %wanted.name, "ports changed: replacing the Rancher load balancer");
            removed = self.delete(lb).await?;
            found = None;
        }
        let lb = match found {
            Some(lb) => lb,
            None => self.create(cluster_name, &wanted).await?,
        };
        let lb = self
            .converge(cluster_name, nodes, lb, &wanted, &removed)
            .await?;
        let lb = self
            .wait_for(lb, "its public endpoints", |lb| {
                lb.lifecycle.state == "active" && !status(lb).ingress.is_empty()
            })
            .await?;
        Ok(status(&lb).into())
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        let wanted = wanted(service)?;
        let lb = self
            .find_ours(cluster_name, &wanted.name)
            .await?
            .ok_or_else(|| {
                CloudError::msg(format!(
                    "Rancher load balancer {} does not exist",
                    wanted.name
                ))
            })?;
        self.converge(cluster_name, nodes, lb, &wanted, &[]).await?;
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        let name = load_balancer_name(service);
        match self.find(&name).await? {
            Some(lb) if recorded_cluster(&lb).is_none_or(|c| c == cluster_name) => {
                self.delete(&lb).await.map(drop)
            }
            _ => Ok(()),
        }
    }
}

/// The metadata an adopted or new load balancer carries: whatever it had,
/// plus the owning cluster and Service.
fn owned_metadata(
    lb: Option<&LoadBalancerService>,
    cluster: &str,
    owner: &str,
) -> BTreeMap<String, serde_json::Value> {
    let mut metadata = lb.and_then(|lb| lb.metadata.clone()).unwrap_or_default();
    metadata.insert(CLUSTER_KEY.to_owned(), cluster.into());
    metadata.insert(SERVICE_KEY.to_owned(), owner.into());
    metadata
}

#[cfg(test)]
mod tests;
