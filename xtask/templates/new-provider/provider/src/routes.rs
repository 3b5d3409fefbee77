//! Routes: each pod CIDR routed through its node's instance, tagged with
//! the cluster; other clusters' routes are neither listed nor deleted.

use async_trait::async_trait;
use ccm_cloud_provider::{CloudError, Route, Routes};

use crate::{PROVIDER_ID_PREFIX, {{Camel}}Provider};

#[async_trait]
impl Routes for {{Camel}}Provider {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let ours: Vec<_> = self
            .api
            .list_routes()
            .await?
            .into_iter()
            .filter(|r| r.cluster == cluster_name)
            .collect();
        // Node names are instance names: one more request for all routes.
        let ids: Vec<String> = ours.iter().filter(|r| !r.blackhole).map(|r| r.target.clone()).collect();
        let instances = if ids.is_empty() {
            Vec::new()
        } else {
            self.api.describe_instances(&ids, &[]).await?
        };
        Ok(ours
            .into_iter()
            .map(|r| {
                let instance = instances.iter().find(|i| i.id == r.target);
                Route {
                    name: r.id.clone(),
                    target_node: instance.map(|i| i.name.clone()).unwrap_or_default(),
                    target_provider_id: Some(format!("{PROVIDER_ID_PREFIX}{}", r.target)),
                    destination_cidr: r.destination,
                    blackhole: r.blackhole || instance.is_none(),
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
        let _ = name_hint;
        let target = route
            .target_provider_id
            .as_deref()
            .and_then(|id| id.strip_prefix(PROVIDER_ID_PREFIX))
            .ok_or(CloudError::InstanceNotFound)?;
        let existing = self.api.list_routes().await?;
        let exists = existing.iter().any(|r| {
            r.cluster == cluster_name && r.destination == route.destination_cidr && r.target == target
        });
        if !exists {
            self.api
                .create_route(cluster_name, route.destination_cidr, target)
                .await?;
        }
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let existing = self.api.list_routes().await?;
        for r in existing
            .iter()
            .filter(|r| r.cluster == cluster_name && r.destination == route.destination_cidr)
        {
            self.api.delete_route(&r.id).await?;
        }
        Ok(())
    }
}
