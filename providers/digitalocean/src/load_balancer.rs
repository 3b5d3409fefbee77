//! One DigitalOcean load balancer per Service.

pub mod annotations;
mod certificates;
mod diff;
pub(crate) mod health;
mod options;
pub(crate) mod ownership;
mod request;
pub(crate) mod service_check;
mod shape;
mod warnings;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::annotations::AnnotationSchema;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, LoadBalancer, LoadBalancerHealth, LoadBalancerIngress,
    LoadBalancerStatus, default_load_balancer_name,
};
use parking_lot::MutexGuard;

use crate::DigitalOceanProvider;
use crate::api::planned;
use crate::api::types::{self, DropletIds, LoadBalancerEnvelope};
use crate::instances::{DropletIndex, DropletRef};
use options::Identity;
use ownership::Owner;
pub(crate) use request::KUBE_PROXY_HEALTH_PORT;
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
    pub(crate) fn created(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.created.lock()
    }

    fn placement(&self) -> Result<Placement<'_>, CloudError> {
        let region = self.region().ok_or_else(|| {
            CloudError::msg("the DigitalOcean provider is not initialized: its region is unknown")
        })?;
        Ok(Placement {
            region,
            vpc_uuid: self.settings.cluster_vpc_id.as_deref(),
        })
    }

    fn owner_of(&self, service: &Service, lb: &types::LoadBalancer) -> Owner {
        ownership::owner(lb, uid(service), self.settings.cluster_tag().as_deref())
    }

    /// The Service's load balancer: by its recorded (or just-created) ID,
    /// else the one tagged for it, else by name. A load balancer found by
    /// ID or name that belongs to another Service or cluster is reported as
    /// [`Lookup::Foreign`], never as the Service's.
    async fn find(&self, service: &Service, identity: &Identity) -> Result<Lookup, CloudError> {
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
                Ok(found) => {
                    let lb = found.load_balancer;
                    let owner = self.owner_of(service, &lb);
                    return Ok(if owner.is_ours() {
                        Lookup::Found(lb)
                    } else {
                        Lookup::Foreign {
                            lb,
                            owner,
                            by: annotations::LOAD_BALANCER_ID,
                        }
                    });
                }
                // Deleted behind our back, or a stale annotation: fall back
                // to the tag and the name, so a retry never creates a second one.
                Err(e) if e.is_not_found() => {
                    self.created().remove(uid(service));
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.find_listed(service, identity).await
    }

    /// The Service's load balancer among all: the one tagged for it, else
    /// by name.
    async fn find_listed(
        &self,
        service: &Service,
        identity: &Identity,
    ) -> Result<Lookup, CloudError> {
        let all: Vec<types::LoadBalancer> = self.api.list_all("/v2/load_balancers", &[]).await?;
        Ok(match self.pick_listed(service, identity, &all) {
            None => Lookup::Missing,
            Some((lb, owner)) if owner.is_ours() => Lookup::Found(lb.clone()),
            Some((lb, owner)) => Lookup::Foreign {
                lb: lb.clone(),
                owner,
                by: annotations::NAME,
            },
        })
    }

    /// The load balancer `find_listed` picks from `all`, and its owner.
    fn pick_listed<'a>(
        &self,
        service: &Service,
        identity: &Identity,
        all: &'a [types::LoadBalancer],
    ) -> Option<(&'a types::LoadBalancer, Owner)> {
        let tag = ownership::service_tag(uid(service));
        if let Some(lb) = all.iter().find(|lb| lb.tags.contains(&tag)) {
            let owner = self.owner_of(service, lb);
            if owner.is_ours() {
                return Some((lb, owner));
            }
        }
        let default_name = default_load_balancer_name(service);
        let names: Vec<&str> = identity
            .custom_name
            .iter()
            .map(String::as_str)
            .chain([default_name.as_str()])
            .collect();
        let lb = names
            .iter()
            .find_map(|name| all.iter().find(|lb| lb.name == *name))?;
        Some((lb, self.owner_of(service, lb)))
    }

    /// The Service's own load balancer among `all`, one list serving many
    /// Services: by its recorded ID, else its tag, else its name, as
    /// [`find`](Self::find) looks. `None` when it has none, when the one
    /// found is another's, or when its annotations cannot be read.
    pub(crate) fn owned_load_balancer<'a>(
        &self,
        service: &Service,
        all: &'a [types::LoadBalancer],
    ) -> Option<&'a types::LoadBalancer> {
        let identity = options::identity(service)
            .inspect_err(|e| {
                tracing::debug!(service = %service_key(service), error = %e, "load balancer not looked up");
            })
            .ok()?;
        let by_id = identity
            .id
            .as_ref()
            .and_then(|id| all.iter().find(|lb| lb.id == *id))
            .map(|lb| (lb, self.owner_of(service, lb)));
        let (lb, owner) = by_id.or_else(|| self.pick_listed(service, &identity, all))?;
        owner.is_ours().then_some(lb)
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

    /// The load balancer the Service may change, or `InvalidInput` naming
    /// the annotation that points at someone else's.
    fn ours(lookup: Lookup) -> Result<Option<types::LoadBalancer>, CloudError> {
        match lookup {
            Lookup::Found(lb) => Ok(Some(lb)),
            Lookup::Missing => Ok(None),
            Lookup::Foreign { lb, owner, by } => Err(CloudError::invalid(
                by,
                format!(
                    "load balancer {} ({}) belongs to {}; it is not changed",
                    lb.id,
                    lb.name,
                    owner.describe()
                ),
            )),
        }
    }
}

/// What a lookup found.
#[derive(Debug)]
enum Lookup {
    /// The Service's own load balancer, or an unclaimed one to adopt.
    Found(types::LoadBalancer),
    /// None.
    Missing,
    /// One the Service's annotations point at that belongs to someone else.
    Foreign {
        lb: types::LoadBalancer,
        owner: Owner,
        /// The annotation that led to it.
        by: &'static str,
    },
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
        Ok(match self.find(service, &identity).await? {
            Lookup::Found(lb) => Some(status_of(&lb, identity.hostname.as_deref())),
            Lookup::Missing | Lookup::Foreign { .. } => None,
        })
    }

    /// Disowning and every annotation are read from the Service alone, so
    /// a new Service costs no lookup before its ensure (certificates and
    /// what exists are checked by the ensure).
    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        Some(match options::is_disowned(service) {
            Ok(true) => Err(CloudError::ImplementedElsewhere),
            Ok(false) => options::parse(service).map(drop),
            Err(e) => Err(e),
        })
    }

    fn annotation_schema(&self) -> Option<&'static AnnotationSchema> {
        Some(&annotations::SCHEMA)
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
        // Every annotation is checked before the first call.
        let options = options::parse(service)?;
        let identity = options.identity.clone();
        let name = self.load_balancer_name(cluster_name, service);
        let placement = self.placement()?;
        // The ports and TLS settings too, for the type asked or defaulted
        // (checked again below against what exists).
        let provisional = request::Shape {
            kind: options.kind.unwrap_or(self.settings.default_lb_type),
            internal: options.internal,
            network_stack: "IPV4",
        };
        let some_certificate = options
            .certificate_id
            .as_deref()
            .or(options.certificate_name.as_deref());
        Plan::new(
            service,
            name.clone(),
            options.clone(),
            provisional,
            some_certificate,
        )?;
        let existing = Self::ours(self.find(service, &identity).await?)?;
        let shape = shape::resolve(
            &options,
            existing.as_ref(),
            self.settings.default_lb_type,
            nodes,
        )?;
        let wanted = certificates::wanted(&self.api, &options).await?;
        let certificate = certificates::choose(&self.api, existing.as_ref(), wanted).await?;
        let warnings = warnings::of(service, shape.kind);
        let plan = Plan::new(service, name, options, shape, certificate.id.as_deref())?;
        let backends = shape::backends(nodes, shape.kind, shape.internal)?;
        let droplet_ids = self.droplet_ids(&backends).await?;
        let cluster_tag = self.settings.cluster_tag();
        let tags: Vec<String> = [
            Some(ownership::service_tag(uid(service))),
            cluster_tag.clone(),
        ]
        .into_iter()
        .flatten()
        .collect();

        let lb = match existing {
            Some(lb) => {
                if lb.status == STATUS_NEW {
                    self.ensure_ready(service, &lb)?;
                }
                let desired = plan.request(droplet_ids, &placement, tags, false);
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
                let desired = plan.request(droplet_ids, &placement, tags, true);
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
        self.seen.remember(uid(service), lb.clone());
        let mut service_annotations = BTreeMap::from([
            (annotations::LOAD_BALANCER_ID.to_owned(), lb.id.clone()),
            (annotations::TYPE.to_owned(), shape.kind.as_str().to_owned()),
        ]);
        if certificate.record
            && let Some(id) = certificate.id
        {
            service_annotations.insert(annotations::CERTIFICATE_ID.to_owned(), id);
        }
        Ok(EnsuredLoadBalancer {
            status: status_of(&lb, identity.hostname.as_deref()),
            service_annotations,
            warnings,
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
        let Some(lb) = Self::ours(self.find(service, &identity).await?)? else {
            return Err(CloudError::msg(format!(
                "no load balancer for Service {} to update yet",
                service_key(service)
            )));
        };
        let current = shape::of(&lb);
        let backends = shape::backends(nodes, current.kind, current.internal)?;
        let desired: BTreeSet<u64> = self.droplet_ids(&backends).await?.into_iter().collect();
        self.ensure_ready(service, &lb)?;
        let current: BTreeSet<u64> = lb.droplet_ids.iter().copied().collect();
        let path = format!("/v2/load_balancers/{}/droplets", lb.id);
        let add: Vec<u64> = desired.difference(&current).copied().collect();
        // A dry run plans the removal too, after the addition.
        if !add.is_empty() {
            planned(
                self.api
                    .post_no_content(&path, &DropletIds { droplet_ids: add })
                    .await,
            )?;
        }
        let remove: Vec<u64> = current.difference(&desired).copied().collect();
        if !remove.is_empty() {
            let body = DropletIds {
                droplet_ids: remove,
            };
            planned(self.api.delete(&path, Some(&body)).await)?;
        }
        // A dry run changed nothing: there is nothing new to remember.
        if !ccm_cloud_provider::fence::dry_run() {
            let mut now = lb;
            now.droplet_ids = desired.into_iter().collect();
            self.seen.remember(uid(service), now);
        }
        Ok(())
    }

    /// What the Service's load balancer says of its droplets: right after
    /// an ensure or update, from what that change saw (no call); otherwise
    /// from one GET of it by its recorded ID (a listing when no ID is known
    /// yet).
    ///
    /// DigitalOcean's API has no per-droplet health: each droplet shares
    /// the load balancer's `status` (`new` is initial, `active` healthy,
    /// `errored` unhealthy). Droplets are named by the nodes' provider IDs;
    /// one no node names is left out. No load balancer of the Service's own
    /// is no targets.
    async fn load_balancer_health(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        if options::is_disowned(service)? {
            return Err(CloudError::ImplementedElsewhere);
        }
        if let Some(lb) = self.seen.take_fresh(uid(service)) {
            return Ok(Some(health::of(&lb, nodes)));
        }
        let identity = options::identity(service)?;
        Ok(Some(match self.find(service, &identity).await? {
            Lookup::Found(lb) => health::of(&lb, nodes),
            Lookup::Missing | Lookup::Foreign { .. } => LoadBalancerHealth::default(),
        }))
    }

    /// Deletes the Service's own load balancer. One its annotations point
    /// at that belongs to another Service or cluster is never deleted.
    async fn ensure_load_balancer_deleted(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        if options::is_disowned(service)? {
            return Err(CloudError::ImplementedElsewhere);
        }
        let identity = options::identity(service)?;
        let mut lookup = self.find(service, &identity).await?;
        if let Lookup::Foreign { lb, owner, by } = &lookup {
            tracing::warn!(
                service = %service_key(service),
                id = %lb.id,
                annotation = by,
                "the load balancer found belongs to {}; not deleting it",
                owner.describe()
            );
            if *by == annotations::LOAD_BALANCER_ID {
                // The Service's own one, if it has one, is still deleted.
                lookup = self.find_listed(service, &identity).await?;
            }
        }
        let Lookup::Found(lb) = lookup else {
            return Ok(());
        };
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
