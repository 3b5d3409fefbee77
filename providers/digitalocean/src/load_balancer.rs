//! One DigitalOcean load balancer per Service.

pub mod annotations;
mod diff;
mod options;
mod request;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancer, LoadBalancerIngress, LoadBalancerStatus,
    default_load_balancer_name,
};
use parking_lot::MutexGuard;

use crate::DigitalOceanProvider;
use crate::api::types::{self, DropletIds, LoadBalancerEnvelope};
use crate::instances::{DropletIndex, DropletRef};
use options::Identity;
use request::{Placement, Plan};

/// How soon to look again at a load balancer that is still being created.
const PROVISIONING_RETRY: Duration = Duration::from_secs(15);
const STATUS_ACTIVE: &str = "active";
const STATUS_NEW: &str = "new";

fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or("default"),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

fn uid(service: &Service) -> &str {
    service.metadata.uid.as_deref().unwrap_or_default()
}

/// The Service's status: the hostname annotation when set, otherwise the
/// load balancer's IPv4 and IPv6 addresses.
fn status_of(lb: &types::LoadBalancer, hostname: Option<&str>) -> LoadBalancerStatus {
    let ingress = match hostname {
        Some(h) => vec![LoadBalancerIngress {
            hostname: Some(h.to_owned()),
            ..Default::default()
        }],
        None => [&lb.ip, &lb.ipv6]
            .into_iter()
            .filter(|ip| !ip.is_empty())
            .map(|ip| LoadBalancerIngress {
                ip: Some(ip.clone()),
                ..Default::default()
            })
            .collect(),
    };
    LoadBalancerStatus { ingress }
}

impl DigitalOceanProvider {
    fn created(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.created.lock()
    }

    fn placement(&self) -> Result<Placement<'_>, CloudError> {
        let region = self.region().ok_or_else(|| {
            CloudError::msg("the DigitalOcean provider is not initialized: its region is unknown")
        })?;
        Ok(Placement {
            region,
            vpc_uuid: self.settings.cluster_vpc_id.as_deref(),
            cluster_tag: self.settings.cluster_tag(),
        })
    }

    /// The cluster tag of another cluster on `lb`, if it carries one and not
    /// ours: such a load balancer is never changed or deleted.
    fn foreign_owner<'a>(&self, lb: &'a types::LoadBalancer) -> Option<&'a str> {
        let ours = self.settings.cluster_tag()?;
        if lb.tags.contains(&ours) {
            return None;
        }
        lb.tags
            .iter()
            .find(|t| t.starts_with("k8s:"))
            .map(String::as_str)
    }

    /// The Service's load balancer: by its recorded (or just-created) ID,
    /// else by name among all load balancers.
    async fn find(
        &self,
        service: &Service,
        identity: &Identity,
    ) -> Result<Option<types::LoadBalancer>, CloudError> {
        let known = identity
            .id
            .clone()
            .or_else(|| self.created().get(uid(service)).cloned());
        if let Some(id) = known {
            match self
                .api
                .get::<LoadBalancerEnvelope>(&format!("/v2/load_balancers/{id}"), &[])
                .await
            {
                Ok(found) => return Ok(Some(found.load_balancer)),
                // Deleted behind our back, or a stale annotation: fall back
                // to the name, so a retry never creates a second one.
                Err(e) if e.is_not_found() => {
                    self.created().remove(uid(service));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let default_name = default_load_balancer_name(service);
        let names: Vec<&str> = identity
            .custom_name
            .iter()
            .map(String::as_str)
            .chain([default_name.as_str()])
            .collect();
        let all: Vec<types::LoadBalancer> = self.api.list_all("/v2/load_balancers", &[]).await?;
        Ok(names
            .iter()
            .find_map(|name| all.iter().find(|lb| lb.name == *name))
            .cloned())
    }

    /// The droplet IDs behind `nodes`: from provider IDs, else by name from
    /// one droplet listing. Nodes without a droplet are left out.
    async fn droplet_ids(&self, nodes: &[Arc<Node>]) -> Result<Vec<u64>, CloudError> {
        let mut ids = BTreeSet::new();
        let mut by_name = Vec::new();
        for node in nodes {
            match DropletRef::of(node) {
                Ok(DropletRef::Id(id)) => {
                    ids.insert(id);
                }
                Ok(r @ DropletRef::Name(_)) => by_name.push(r),
                Err(e) => tracing::warn!(error = %e, "node left out of load balancers"),
            }
        }
        if !by_name.is_empty() {
            let droplets = self.all_droplets().await?;
            let index = DropletIndex::new(&droplets);
            for r in &by_name {
                match index.find(r) {
                    Some(d) => {
                        ids.insert(d.id);
                    }
                    None => {
                        tracing::warn!(node = ?r, "no droplet for node; left out of load balancers");
                    }
                }
            }
        }
        Ok(ids.into_iter().collect())
    }

    fn ensure_ready(&self, service: &Service, lb: &types::LoadBalancer) -> Result<(), CloudError> {
        match lb.status.as_str() {
            STATUS_ACTIVE => Ok(()),
            STATUS_NEW | "" => {
                // Polling it is then one GET by ID, not a search by name.
                self.created()
                    .insert(uid(service).to_owned(), lb.id.clone());
                Err(CloudError::Retry {
                    after: PROVISIONING_RETRY,
                    reason: format!("load balancer {} is still being created", lb.id),
                })
            }
            other => Err(CloudError::msg(format!(
                "load balancer {} has status `{other}`",
                lb.id
            ))),
        }
    }
}

#[async_trait]
impl LoadBalancer for DigitalOceanProvider {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        if options::is_disowned(service)? {
            return Err(CloudError::ImplementedElsewhere);
        }
        let identity = options::identity(service)?;
        Ok(self
            .find(service, &identity)
            .await?
            .map(|lb| status_of(&lb, identity.hostname.as_deref())))
    }

    /// The custom name annotation, else upstream's default name.
    fn load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        options::identity(service)
            .ok()
            .and_then(|i| i.custom_name)
            .unwrap_or_else(|| default_load_balancer_name(service))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        if options::is_disowned(service)? {
            return Err(CloudError::ImplementedElsewhere);
        }
        // Every check before the first call: a bad Service changes nothing.
        let options = options::parse(service)?;
        let identity = options.identity.clone();
        let plan = Plan::new(
            service,
            self.load_balancer_name(cluster_name, service),
            options,
        )?;
        let placement = self.placement()?;
        let droplet_ids = self.droplet_ids(nodes).await?;
        let desired = plan.request(droplet_ids, &placement);

        let lb = match self.find(service, &identity).await? {
            Some(lb) => {
                if let Some(owner) = self.foreign_owner(&lb) {
                    return Err(CloudError::msg(format!(
                        "load balancer {} ({}) belongs to another cluster ({owner}); not changing it",
                        lb.id, lb.name
                    )));
                }
                if lb.status == STATUS_NEW {
                    self.ensure_ready(service, &lb)?;
                }
                let changed = diff::differences(&lb, &desired);
                if changed.is_empty() {
                    lb
                } else {
                    tracing::info!(service = %service_key(service), id = %lb.id, ?changed, "updating load balancer");
                    let path = format!("/v2/load_balancers/{}", lb.id);
                    self.api
                        .put::<_, LoadBalancerEnvelope>(&path, &desired)
                        .await?
                        .load_balancer
                }
            }
            None => {
                tracing::info!(service = %service_key(service), name = %plan.name(), "creating load balancer");
                let created = self
                    .api
                    .post::<_, LoadBalancerEnvelope>("/v2/load_balancers", &desired)
                    .await?
                    .load_balancer;
                self.created()
                    .insert(uid(service).to_owned(), created.id.clone());
                created
            }
        };
        self.ensure_ready(service, &lb)?;
        let service_annotations =
            BTreeMap::from([(annotations::LOAD_BALANCER_ID.to_owned(), lb.id.clone())]);
        Ok(EnsuredLoadBalancer {
            status: status_of(&lb, identity.hostname.as_deref()),
            service_annotations,
            ..EnsuredLoadBalancer::default()
        })
    }

    /// Adds and removes backend droplets only, through the load balancer's
    /// droplets endpoints; other settings are left as they are.
    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        if options::is_disowned(service)? {
            return Err(CloudError::ImplementedElsewhere);
        }
        let identity = options::identity(service)?;
        let desired: BTreeSet<u64> = self.droplet_ids(nodes).await?.into_iter().collect();
        let Some(lb) = self.find(service, &identity).await? else {
            return Err(CloudError::msg(format!(
                "no load balancer for Service {} to update yet",
                service_key(service)
            )));
        };
        if let Some(owner) = self.foreign_owner(&lb) {
            return Err(CloudError::msg(format!(
                "load balancer {} belongs to another cluster ({owner}); not changing it",
                lb.id
            )));
        }
        self.ensure_ready(service, &lb)?;
        let current: BTreeSet<u64> = lb.droplet_ids.iter().copied().collect();
        let path = format!("/v2/load_balancers/{}/droplets", lb.id);
        let add: Vec<u64> = desired.difference(&current).copied().collect();
        if !add.is_empty() {
            self.api
                .post_no_content(&path, &DropletIds { droplet_ids: add })
                .await?;
        }
        let remove: Vec<u64> = current.difference(&desired).copied().collect();
        if !remove.is_empty() {
            self.api
                .delete(
                    &path,
                    Some(&DropletIds {
                        droplet_ids: remove,
                    }),
                )
                .await?;
        }
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        if options::is_disowned(service)? {
            return Err(CloudError::ImplementedElsewhere);
        }
        let identity = options::identity(service)?;
        let Some(lb) = self.find(service, &identity).await? else {
            return Ok(());
        };
        if let Some(owner) = self.foreign_owner(&lb) {
            tracing::warn!(id = %lb.id, owner, "load balancer belongs to another cluster; not deleting it");
            return Ok(());
        }
        tracing::info!(service = %service_key(service), id = %lb.id, "deleting load balancer");
        match self
            .api
            .delete::<()>(&format!("/v2/load_balancers/{}", lb.id), None)
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        self.created().remove(uid(service));
        Ok(())
    }
}
