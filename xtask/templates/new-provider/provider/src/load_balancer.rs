//! Load balancers: one per Service, named after the Service's UID (as
//! upstream names them) and tagged with the cluster that owns it; a load
//! balancer of that name tagged for another cluster is never touched.

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

impl {{Camel}}Provider {
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
        let name = &spec.name;
        let lb = match self.api.find_load_balancer(name).await? {
            None => self.api.create_load_balancer(&spec).await?,
            Some(lb) if lb.spec.tags.get(CLUSTER_TAG) != spec.tags.get(CLUSTER_TAG) => {
                return Err(CloudError::msg(format!(
                    "load balancer {name} belongs to another cluster: left alone"
                )));
            }
            Some(lb) if lb.spec == spec => lb,
            Some(lb) => self.api.update_load_balancer(&lb.id, &spec).await?,
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
        let lb = self.find(cluster_name, service).await?.ok_or_else(|| {
            CloudError::msg(format!("load balancer {} does not exist", spec.name))
        })?;
        if lb.spec != spec {
            self.api.update_load_balancer(&lb.id, &spec).await?;
        }
        Ok(())
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
