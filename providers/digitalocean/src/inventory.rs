//! [`Inventory`]: what this provider made for its cluster, for
//! `<binary> audit`.
//!
//! # What is this cluster's
//! Nothing on DigitalOcean carries the Kubernetes `--cluster-name`; the
//! mark upstream's CCM and this one put on a cluster's load balancers is
//! the cluster tag `k8s:<DO_CLUSTER_ID>`. So there is an inventory only
//! with `DO_CLUSTER_ID` set, and the `cluster_name` argument is not
//! consulted. Without it a load balancer tagged `k8s-service:<uid>` could
//! be any cluster's in the account, and none is listed.
//!
//! - **Load balancers** ([`OwnedResource::LOAD_BALANCER`]) tagged with the
//!   cluster tag and no other cluster's, with or without a
//!   `k8s-service:<uid>` tag (upstream tags what it creates with the
//!   cluster tag alone). The owner is [`Owner::LoadBalancerName`] with the
//!   load balancer's name, which is what
//!   [`LoadBalancer::load_balancer_name`](ccm_cloud_provider::LoadBalancer::load_balancer_name)
//!   answers for its Service once an ensure has run (the name annotation,
//!   else upstream's name from the UID). A name derived from the
//!   `k8s-service:<uid>` tag would miss every Service with a name
//!   annotation; the name on the load balancer misses only a Service whose
//!   name annotation changed and has not been ensured since. The
//!   load-balancer-ID annotation is no owner: the framework matches
//!   Services by name.
//! - **The public-access firewall** ([`FIREWALL_KIND`]) when
//!   `PUBLIC_ACCESS_FIREWALL_NAME` is set: the firewall of that name, as the
//!   service observer finds it, owned by [`Owner::Cluster`]. Its rules are
//!   not listed one by one: a rule carries no mark of the Service or node
//!   port it was opened for, and the observer rewrites the whole firewall
//!   from the Services on every sync, so a rule no Service needs any more
//!   lasts only until the next sync.
//!
//! Load balancers come first, then the firewall: the order they can be
//! deleted in.
//!
//! # API calls
//! A listing is one load-balancer list and, with a firewall, its one GET
//! (or a firewall list the first time). A deletion reads the resource
//! again (one GET) and deletes it only if it still is what was listed: the
//! same name and owner, and still this cluster's.

use async_trait::async_trait;
use ccm_cloud_provider::{CloudError, Inventory, OwnedResource, Owner};

use crate::DigitalOceanProvider;
use crate::api::types::{self, LoadBalancerEnvelope};
use crate::firewall::rules::Firewall;
use crate::load_balancer::ownership;

/// The kind of the public-access firewall in an [`OwnedResource`].
pub const FIREWALL_KIND: &str = "firewall";

/// Why the inventory refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InventoryError {
    /// There is no cluster tag to tell this cluster's resources by.
    #[error("the DigitalOcean provider lists its cluster's resources only with {env} set")]
    NoClusterId {
        /// The variable that sets it.
        env: &'static str,
    },
    /// A kind the provider never lists.
    #[error("`{0}` is not a kind of resource the DigitalOcean provider lists")]
    UnknownKind(String),
    /// The resource changed since it was listed (renamed, re-tagged, or
    /// not this cluster's any more): deleting it could delete what a
    /// Service now uses.
    #[error("{kind} {id} is no longer what was listed; not deleting it (list again)")]
    Changed {
        /// Its kind.
        kind: String,
        /// Its ID.
        id: String,
    },
}

impl From<InventoryError> for CloudError {
    fn from(err: InventoryError) -> Self {
        CloudError::msg(err.to_string())
    }
}

/// `lb` as listed, when it is the cluster's tagged `cluster_tag`.
fn owned_load_balancer(lb: &types::LoadBalancer, cluster_tag: &str) -> Option<OwnedResource> {
    ownership::is_clusters(lb, cluster_tag).then(|| OwnedResource {
        kind: OwnedResource::LOAD_BALANCER.to_owned(),
        id: lb.id.clone(),
        name: lb.name.clone(),
        owner: Owner::LoadBalancerName(lb.name.clone()),
        cidr: None,
        provider_id: None,
    })
}

/// `firewall` as listed, when it is the public-access firewall `name`.
fn owned_firewall(firewall: &Firewall, name: &str) -> Option<OwnedResource> {
    (firewall.spec.name == name).then(|| OwnedResource {
        kind: FIREWALL_KIND.to_owned(),
        id: firewall.id.clone(),
        name: firewall.spec.name.clone(),
        owner: Owner::Cluster,
        cidr: None,
        provider_id: None,
    })
}

impl DigitalOceanProvider {
    /// Whether the provider can tell its cluster's resources: with
    /// `DO_CLUSTER_ID`.
    pub(crate) fn has_inventory(&self) -> bool {
        self.settings.cluster_tag().is_some()
    }

    fn inventory_cluster_tag(&self) -> Result<String, InventoryError> {
        self.settings
            .cluster_tag()
            .ok_or(InventoryError::NoClusterId {
                env: crate::ENV_CLUSTER_ID,
            })
    }

    /// Deletes load balancer `resource.id` if it still is `resource`.
    async fn delete_owned_load_balancer(
        &self,
        cluster_tag: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError> {
        let path = format!("/v2/load_balancers/{}", resource.id);
        let lb = match self.api.get::<LoadBalancerEnvelope>(&path, &[]).await {
            Ok(found) => found.load_balancer,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if owned_load_balancer(&lb, cluster_tag).as_ref() != Some(resource) {
            return Err(changed(resource));
        }
        tracing::info!(id = %lb.id, name = %lb.name, "deleting a load balancer of the cluster's inventory");
        match self.api.delete::<()>(&path, None).await {
            Err(e) if !e.is_not_found() => return Err(e.into()),
            _ => {}
        }
        self.created().retain(|_, id| *id != lb.id);
        Ok(())
    }

    /// Deletes firewall `resource.id` if it still is `resource`, the
    /// public-access firewall.
    async fn delete_owned_firewall(&self, resource: &OwnedResource) -> Result<(), CloudError> {
        let Some(wanted) = &self.settings.firewall else {
            return Err(changed(resource));
        };
        let Some(firewall) = self.firewall_by_id(&resource.id).await? else {
            return Ok(());
        };
        if owned_firewall(&firewall, &wanted.name).as_ref() != Some(resource) {
            return Err(changed(resource));
        }
        Ok(self.delete_firewall(&firewall.id).await?)
    }
}

fn changed(resource: &OwnedResource) -> CloudError {
    InventoryError::Changed {
        kind: resource.kind.clone(),
        id: resource.id.clone(),
    }
    .into()
}

#[async_trait]
impl Inventory for DigitalOceanProvider {
    /// The load balancers tagged `k8s:<DO_CLUSTER_ID>` (and no other
    /// cluster's), then the public-access firewall; see the module docs.
    /// `cluster_name` is not a DigitalOcean mark and is not consulted.
    ///
    /// # Errors
    /// Without `DO_CLUSTER_ID`, an error saying so; otherwise the API's.
    async fn owned_resources(&self, _cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError> {
        let cluster_tag = self.inventory_cluster_tag()?;
        let all: Vec<types::LoadBalancer> = self.api.list_all("/v2/load_balancers", &[]).await?;
        let mut owned: Vec<OwnedResource> = all
            .iter()
            .filter_map(|lb| owned_load_balancer(lb, &cluster_tag))
            .collect();
        if let Some(wanted) = &self.settings.firewall
            && let Some(firewall) = self.current_firewall(&wanted.name).await?
        {
            owned.extend(owned_firewall(&firewall, &wanted.name));
        }
        Ok(owned)
    }

    /// Reads the resource again and deletes it if it still is what was
    /// listed; one already gone is no error.
    ///
    /// # Errors
    /// Without `DO_CLUSTER_ID`, for a kind it never lists, or when the
    /// resource is no longer what was listed (renamed, another cluster's):
    /// an error and nothing deleted. Otherwise the API's.
    async fn delete_owned(
        &self,
        _cluster_name: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError> {
        let cluster_tag = self.inventory_cluster_tag()?;
        match resource.kind.as_str() {
            OwnedResource::LOAD_BALANCER => {
                self.delete_owned_load_balancer(&cluster_tag, resource)
                    .await
            }
            FIREWALL_KIND => self.delete_owned_firewall(resource).await,
            other => Err(InventoryError::UnknownKind(other.to_owned()).into()),
        }
    }
}
