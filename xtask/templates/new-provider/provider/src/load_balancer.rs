//! Load balancers: one per Service, named after the Service's UID (as
//! upstream names them) and tagged with the cluster that owns it; a load
//! balancer of that name tagged for another cluster is never touched.
//!
//! Spec, plan, apply: [`{{Camel}}Provider::spec`] reads what the Service
//! asks, [`plan`] compares it with what the cloud holds, both without a
//! call, and the trait methods carry the plan out through [`crate::api::Api`].
//! A cloud whose load balancer takes several calls to change (listeners,
//! target groups, firewall rules) gives [`Plan`] one variant per call.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancer, LoadBalancerIngress, LoadBalancerStatus,
};

use crate::api::{CloudLoadBalancer, ForwardedPort, LoadBalancerSpec};
use crate::{CLUSTER_TAG, PROVIDER_ID_PREFIX, {{Camel}}Provider};

/// The tag naming the Service a load balancer serves (`namespace/name`).
pub const SERVICE_TAG: &str = "kubernetes-service";

fn status(lb: &CloudLoadBalancer) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: vec![LoadBalancerIngress {
            ip: Some(lb.address.clone()),
            ..LoadBalancerIngress::default()
        }],
    }
}

/// The Service's ports, checked before anything is changed.
fn ports(service: &Service) -> Result<Vec<ForwardedPort>, CloudError> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    if ports.is_empty() {
        return Err(CloudError::invalid("spec.ports", "a LoadBalancer Service needs a port"));
    }
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            if protocol != "TCP" && protocol != "UDP" {
                return Err(CloudError::invalid(
                    format!("spec.ports[{i}].protocol"),
                    format!("{protocol} is not supported: TCP or UDP"),
                ));
            }
            let node_port = p.node_port.ok_or_else(|| {
                CloudError::invalid(format!("spec.ports[{i}].nodePort"), "not allocated yet")
            })?;
            Ok(ForwardedPort {
                port: p.port,
                node_port,
                protocol,
            })
        })
        .collect()
}

/// The instance IDs behind `nodes` (nodes without a provider ID of this
/// cloud are left out).
fn targets(nodes: &[Arc<Node>]) -> Vec<String> {
    let mut ids: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
        .filter_map(|id| id.strip_prefix(PROVIDER_ID_PREFIX))
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// What an ensure does to the cloud.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan<'a> {
    /// Nothing: the load balancer is as the Service asks.
    InPlace(&'a CloudLoadBalancer),
    /// There is none of the name: create it.
    Create,
    /// This cluster's, but different: update it.
    Update(&'a CloudLoadBalancer),
}

/// What to do so that the cloud holds `spec`, given the load balancer of
/// its name the cloud holds (`found`).
///
/// # Errors
/// When `found` is tagged for another cluster: it is never touched.
pub(crate) fn plan<'a>(
    spec: &LoadBalancerSpec,
    found: Option<&'a CloudLoadBalancer>,
) -> Result<Plan<'a>, CloudError> {
    match found {
        None => Ok(Plan::Create),
        Some(lb) if lb.spec.tags.get(CLUSTER_TAG) != spec.tags.get(CLUSTER_TAG) => Err(
            CloudError::msg(format!(
                "load balancer {} belongs to another cluster: left alone",
                spec.name
            )),
        ),
        Some(lb) if lb.spec == *spec => Ok(Plan::InPlace(lb)),
        Some(lb) => Ok(Plan::Update(lb)),
    }
}

impl {{Camel}}Provider {
    /// What the Service asks of its load balancer.
    fn spec(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerSpec, CloudError> {
        let m = &service.metadata;
        let owner = format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or("default"),
            m.name.as_deref().unwrap_or_default()
        );
        Ok(LoadBalancerSpec {
            name: self.load_balancer_name(cluster_name, service),
            tags: BTreeMap::from([
                (CLUSTER_TAG.to_owned(), cluster_name.to_owned()),
                (SERVICE_TAG.to_owned(), owner),
            ]),
            ports: ports(service)?,
            targets: targets(nodes),
        })
    }

    /// This cluster's load balancer for `service`, if it has one.
    async fn find(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<CloudLoadBalancer>, CloudError> {
        let name = self.load_balancer_name(cluster_name, service);
        let found = self.api.find_load_balancer(&name).await?;
        Ok(found.filter(|lb| lb.spec.tags.get(CLUSTER_TAG).map(String::as_str) == Some(cluster_name)))
    }
}

#[async_trait]
impl LoadBalancer for {{Camel}}Provider {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        Ok(self.find(cluster_name, service).await?.as_ref().map(status))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        let spec = self.spec(cluster_name, service, nodes)?;
        let found = self.api.find_load_balancer(&spec.name).await?;
        let lb = match plan(&spec, found.as_ref())? {
            Plan::InPlace(lb) => lb.clone(),
            Plan::Create => self.api.create_load_balancer(&spec).await?,
            Plan::Update(lb) => self.api.update_load_balancer(&lb.id, &spec).await?,
        };
        Ok(status(&lb).into())
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        let spec = self.spec(cluster_name, service, nodes)?;
        let found = self.api.find_load_balancer(&spec.name).await?;
        match plan(&spec, found.as_ref())? {
            Plan::InPlace(_) => Ok(()),
            // The next ensure creates it.
            Plan::Create => Err(CloudError::msg(format!(
                "load balancer {} does not exist",
                spec.name
            ))),
            Plan::Update(lb) => self.api.update_load_balancer(&lb.id, &spec).await.map(drop),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        if let Some(lb) = self.find(cluster_name, service).await? {
            self.api.delete_load_balancer(&lb.id).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cluster: &str, targets: &[&str]) -> LoadBalancerSpec {
        LoadBalancerSpec {
            name: "a1b2".to_owned(),
            tags: BTreeMap::from([
                (CLUSTER_TAG.to_owned(), cluster.to_owned()),
                (SERVICE_TAG.to_owned(), "shop/web".to_owned()),
            ]),
            ports: vec![ForwardedPort {
                port: 80,
                node_port: 30080,
                protocol: "TCP".to_owned(),
            }],
            targets: targets.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn held(spec: LoadBalancerSpec) -> CloudLoadBalancer {
        CloudLoadBalancer {
            id: "lb-1".to_owned(),
            address: "192.0.2.10".to_owned(),
            spec,
        }
    }

    #[test]
    fn the_plan_creates_what_is_missing_updates_what_differs_and_keeps_what_matches() {
        let wanted = spec("c1", &["i-1", "i-2"]);
        assert_eq!(plan(&wanted, None).ok(), Some(Plan::Create));
        let same = held(wanted.clone());
        assert_eq!(plan(&wanted, Some(&same)).ok(), Some(Plan::InPlace(&same)));
        let fewer = held(spec("c1", &["i-1"]));
        assert_eq!(plan(&wanted, Some(&fewer)).ok(), Some(Plan::Update(&fewer)));
    }

    #[test]
    fn the_plan_refuses_another_clusters_load_balancer() {
        let theirs = held(spec("c2", &["i-1"]));
        let err = plan(&spec("c1", &["i-1"]), Some(&theirs)).unwrap_err();
        assert!(err.to_string().contains("another cluster"), "{err}");
    }
}
