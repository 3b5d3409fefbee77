//! The fake's `Routes`: routes held in memory, each to a known instance.

use async_trait::async_trait;
use ccm_cloud_provider::{CloudError, Route, Routes};

use crate::instance::InstanceState;
use crate::load_balancer::describe;
use crate::{FakeCloud, Operation, OwnedRoute};

#[async_trait]
impl Routes for FakeCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.enter(Operation::ListRoutes, vec![cluster_name.to_owned()], None)
            .await?;
        let state = self.state();
        Ok(state
            .routes
            .iter()
            .filter(|r| r.cluster_name == cluster_name)
            .map(|r| {
                let target_alive = state
                    .instances
                    .get(&r.route.target_node)
                    .is_some_and(|i| i.state != InstanceState::Terminated);
                Route {
                    blackhole: r.route.blackhole || !target_alive,
                    ..r.route.clone()
                }
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let args = vec![
            route.destination_cidr.to_string(),
            route.target_node.clone(),
        ];
        self.enter(Operation::CreateRoute, args, None).await?;
        let settings = self.settings();
        let auto = settings.auto_instances.then_some(&settings);
        let mut state = self.state();
        if state.lookup(&route.target_node, None, auto).is_none() {
            return Err(CloudError::InstanceNotFound);
        }
        let existing = state
            .routes
            .iter()
            .find(|r| r.route.destination_cidr == route.destination_cidr);
        match existing {
            Some(r)
                if r.route.target_node == route.target_node && r.cluster_name == cluster_name =>
            {
                describe(Operation::CreateRoute, None)
            }
            Some(r) => Err(CloudError::msg(format!(
                "a route for {} already exists (to {:?}, cluster {})",
                route.destination_cidr, r.route.target_node, r.cluster_name
            ))),
            None => {
                let change = format!("{} -> {}", route.destination_cidr, route.target_node);
                describe(Operation::CreateRoute, Some(&change))?;
                let route = Route {
                    name: name_hint.to_owned(),
                    blackhole: false,
                    ..route.clone()
                };
                state.routes.push(OwnedRoute {
                    cluster_name: cluster_name.to_owned(),
                    route,
                });
                Ok(())
            }
        }
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let args = vec![
            route.destination_cidr.to_string(),
            route.target_node.clone(),
        ];
        self.enter(Operation::DeleteRoute, args, None).await?;
        let mut state = self.state();
        let owned = |r: &OwnedRoute| {
            r.cluster_name == cluster_name && r.route.destination_cidr == route.destination_cidr
        };
        let change = state
            .routes
            .iter()
            .any(owned)
            .then(|| format!("delete {} -> {}", route.destination_cidr, route.target_node));
        describe(Operation::DeleteRoute, change.as_deref())?;
        state.routes.retain(|r| !owned(r));
        Ok(())
    }
}
