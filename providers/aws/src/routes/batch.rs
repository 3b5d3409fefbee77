//! A route controller pass's creates at once: the route tables read once,
//! the target instances looked up together (by the instance IDs in their
//! provider IDs, else by name), each instance's source/destination check
//! turned off once, then each route put in every table, a bounded number
//! at a time.
//!
//! Upstream pays a `DescribeInstances` and a `DescribeRouteTables` per
//! create; here a batch pays one of each (a `DescribeInstances` per 200
//! instances), whatever its size.

use std::collections::BTreeMap;

use ccm_cloud_provider::{BatchResult, CloudError, RouteCreate};
use futures::future::join_all;
use tokio::sync::Semaphore;

use super::{live, target_node};
use crate::provider::Cloud;

/// Creates of one batch in flight at once: enough to keep the client-side
/// rate limit's bucket busy, few enough that none waits for a token long.
const IN_FLIGHT: usize = 16;

impl Cloud {
    /// Creates each of `routes` as `create_route` would; one result per
    /// route, in order.
    pub(super) async fn create_routes(&self, routes: &[RouteCreate]) -> BatchResult<()> {
        if routes.is_empty() {
            return Ok(Vec::new());
        }
        let tables = self.route_tables().await?;
        let nodes: Vec<_> = routes.iter().map(|c| target_node(&c.route)).collect();
        let found = self
            .find_instances(&nodes.iter().collect::<Vec<_>>())
            .await?;
        let targets: Vec<_> = found.into_iter().map(live).collect();
        // Each instance once, however many of its routes are in the batch.
        let mut instances = BTreeMap::new();
        for instance in targets.iter().flatten() {
            instances
                .entry(instance.instance_id().unwrap_or_default())
                .or_insert(instance);
        }
        let slots = Semaphore::new(IN_FLIGHT);
        let mut turning_off = Vec::with_capacity(instances.len());
        for (id, instance) in instances {
            let slots = &slots;
            turning_off.push(async move {
                let _slot = slots.acquire().await;
                (id, self.allow_forwarding(instance).await)
            });
        }
        let forwarding: BTreeMap<&str, Result<(), CloudError>> =
            join_all(turning_off).await.into_iter().collect();
        let mut creates = Vec::with_capacity(routes.len());
        for (create, target) in routes.iter().zip(&targets) {
            let (slots, tables, forwarding) = (&slots, &tables, &forwarding);
            creates.push(async move {
                let instance = target.as_ref().map_err(Clone::clone)?;
                let id = instance.instance_id().unwrap_or_default();
                if let Some(Err(err)) = forwarding.get(id) {
                    return Err(err.clone());
                }
                let _slot = slots.acquire().await;
                self.route_in_tables(tables, create.route.destination_cidr, id)
                    .await
            });
        }
        Ok(join_all(creates).await)
    }
}
