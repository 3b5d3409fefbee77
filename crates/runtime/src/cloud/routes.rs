//! Route calls through the [`MeteredCloud`]: each create and delete a
//! fenced mutation of the routes class, and a batch of creates one call
//! when the provider shares their work.

use async_trait::async_trait;
use ccm_cloud_provider::{BatchResult, CloudError, Route, RouteCreate, Routes};
use futures::future::join_all;

use super::MeteredCloud;
use super::planned::route_key;

#[async_trait]
impl Routes for MeteredCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.observe("list_routes", None, async {
            self.routes_inner()?.list_routes(cluster_name).await
        })
        .await
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.mutate("create_route", || route_key(route), async {
            self.routes_inner()?
                .create_route(cluster_name, name_hint, route)
                .await
        })
        .await
    }

    /// One fenced call of the routes class when the provider batches
    /// creates; otherwise (and in a dry run, which plans each route) a
    /// [`Routes::create_route`] call per route, all at once: each is
    /// counted, limited by the routes class and fenced on its own.
    async fn create_routes(&self, cluster_name: &str, routes: &[RouteCreate]) -> BatchResult<()> {
        let batches = self
            .inner
            .routes()
            .is_some_and(Routes::batches_route_creates);
        if !batches || self.dry_run.is_some() {
            return Ok(join_all(
                routes.iter().map(|create| {
                    self.create_route(cluster_name, &create.name_hint, &create.route)
                }),
            )
            .await);
        }
        let object = || format!("{} routes", routes.len());
        self.mutate_batch("create_routes", routes.len(), object, async {
            self.routes_inner()?
                .create_routes(cluster_name, routes)
                .await
        })
        .await
    }

    fn batches_route_creates(&self) -> bool {
        self.inner
            .routes()
            .is_some_and(Routes::batches_route_creates)
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.mutate("delete_route", || route_key(route), async {
            self.routes_inner()?.delete_route(cluster_name, route).await
        })
        .await
    }
}
