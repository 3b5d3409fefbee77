//! The fake's `Inventory`: the load balancers and routes it holds for a
//! cluster, for `<binary> audit`.

use async_trait::async_trait;
use ccm_cloud_provider::{CloudError, Inventory, OwnedResource, Owner};

use crate::load_balancer::describe;
use crate::{FakeCloud, Operation};

/// The kind the fake gives its routes.
pub const ROUTE: &str = "route";

#[async_trait]
impl Inventory for FakeCloud {
    async fn owned_resources(&self, cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError> {
        self.enter(
            Operation::OwnedResources,
            vec![cluster_name.to_owned()],
            None,
        )
        .await?;
        let state = self.state();
        let load_balancers = state
            .load_balancers
            .values()
            .filter(|lb| lb.cluster_name == cluster_name)
            .map(|lb| OwnedResource {
                kind: OwnedResource::LOAD_BALANCER.to_owned(),
                id: lb.name.clone(),
                name: format!("{} ({})", lb.name, lb.service),
                owner: Owner::LoadBalancerName(lb.name.clone()),
                cidr: None,
                provider_id: None,
            });
        let routes = state
            .routes
            .iter()
            .filter(|r| r.cluster_name == cluster_name)
            .map(|r| OwnedResource {
                kind: ROUTE.to_owned(),
                id: r.route.destination_cidr.to_string(),
                name: r.route.name.clone(),
                owner: Owner::Node(r.route.target_node.clone()),
                cidr: Some(r.route.destination_cidr.to_string()),
                provider_id: r.route.target_provider_id.clone(),
            });
        Ok(load_balancers.chain(routes).collect())
    }

    async fn delete_owned(
        &self,
        cluster_name: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError> {
        self.enter(
            Operation::DeleteOwned,
            vec![resource.kind.clone(), resource.id.clone()],
            None,
        )
        .await?;
        let mut state = self.state();
        let detail = format!("delete {} {}", resource.kind, resource.id);
        match resource.kind.as_str() {
            OwnedResource::LOAD_BALANCER => {
                let owned = state
                    .load_balancers
                    .get(&resource.id)
                    .is_some_and(|lb| lb.cluster_name == cluster_name);
                describe(Operation::DeleteOwned, owned.then_some(detail.as_str()))?;
                if owned {
                    state.load_balancers.remove(&resource.id);
                }
            }
            ROUTE => {
                let owned = |r: &crate::OwnedRoute| {
                    r.cluster_name == cluster_name
                        && r.route.destination_cidr.to_string() == resource.id
                };
                let any = state.routes.iter().any(owned);
                describe(Operation::DeleteOwned, any.then_some(detail.as_str()))?;
                state.routes.retain(|r| !owned(r));
            }
            other => {
                return Err(CloudError::invalid(
                    "kind",
                    format!("the fake cloud has no {other} resources"),
                ));
            }
        }
        Ok(())
    }
}
