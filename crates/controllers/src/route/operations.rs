//! Route creates and deletes: bounded in flight, each retried.
//!
//! A pass's creates go to the provider together ([`Routes::create_routes`]),
//! so a provider that batches them reads its route tables and looks up the
//! target instances once for the lot instead of once per route; only the
//! creates that failed are retried, one by one.
//!
//! Upstream wraps each create in `RetryOnConflict` with a backoff of 5
//! steps from 100 ms with full jitter — which, since a cloud error is never
//! a Kubernetes conflict, never actually retries. We retry what that
//! backoff intended: up to 5 attempts, 100–200 ms apart, or after exactly
//! the delay the cloud asked for; errors a retry cannot fix fail at once and
//! are left to the next pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ccm_cloud_provider::{CloudError, Route, RouteCreate, Routes};
use futures::future::join_all;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::plan::Create;

/// Upstream's `maxConcurrentRouteOperations`: cloud calls in flight at once.
pub(super) const MAX_IN_FLIGHT: usize = 200;
/// Attempts per operation (upstream's backoff `Steps`).
const ATTEMPTS: u32 = 5;
/// The wait before a retry (upstream's backoff `Duration`); up to twice as
/// long with jitter.
const RETRY_BASE: Duration = Duration::from_millis(100);
/// A cloud asking for a longer wait than this is not retried within the
/// pass: the pass fails and the next one waits at least that long.
const MAX_INLINE_WAIT: Duration = Duration::from_secs(10);

/// Creates and deletes routes of one cluster.
pub(super) struct RouteOps {
    routes: Arc<dyn Routes>,
    cluster_name: String,
    slots: Semaphore,
    max_in_flight: usize,
    /// Routes created or deleted so far.
    changes: AtomicU64,
}

impl std::fmt::Debug for RouteOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteOps")
            .field("cluster_name", &self.cluster_name)
            .finish_non_exhaustive()
    }
}

/// How long to wait before retrying after `err`, if a retry can help.
fn retry_delay(err: &CloudError) -> Option<Duration> {
    match err {
        CloudError::Throttled { .. } | CloudError::Retry { .. } => err
            .requested_delay()
            .filter(|delay| *delay <= MAX_INLINE_WAIT),
        CloudError::Other { .. } | CloudError::QuotaExceeded { .. } => {
            Some(RETRY_BASE + RETRY_BASE.mul_f64(fastrand::f64()))
        }
        // Bad input, a missing instance or capability: the next pass, with
        // fresh nodes, is the retry.
        _ => None,
    }
}

impl RouteOps {
    /// Operations on `cluster_name`'s routes through `routes` (the metered,
    /// fenced cloud), at most `max_in_flight` calls at once.
    pub(super) fn new(routes: Arc<dyn Routes>, cluster_name: String, max_in_flight: usize) -> Self {
        Self {
            routes,
            cluster_name,
            slots: Semaphore::new(max_in_flight.max(1)),
            max_in_flight: max_in_flight.max(1),
            changes: AtomicU64::new(0),
        }
    }

    /// Routes created or deleted so far, replaced routes included: a pass
    /// changed the route table when this grew during it.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// Calls `op` until it succeeds, a retry cannot help, or the attempts
    /// are used up. A call slot is held only during the call.
    async fn retrying<Fut>(&self, op: impl Fn() -> Fut) -> Result<(), CloudError>
    where
        Fut: Future<Output = Result<(), CloudError>>,
    {
        self.retrying_from(1, op).await
    }

    /// [`RouteOps::retrying`], when `attempt - 1` attempts were made already.
    async fn retrying_from<Fut>(
        &self,
        mut attempt: u32,
        op: impl Fn() -> Fut,
    ) -> Result<(), CloudError>
    where
        Fut: Future<Output = Result<(), CloudError>>,
    {
        loop {
            let result = {
                let Ok(_slot) = self.slots.acquire().await else {
                    return Err(CloudError::msg("route operations stopped"));
                };
                op().await
            };
            let err = match result {
                Ok(()) => return Ok(()),
                Err(err) => err,
            };
            match retry_delay(&err) {
                Some(delay) if attempt < ATTEMPTS => {
                    tracing::debug!(attempt, error = %err, ?delay, "route operation failed; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                _ => return Err(err),
            }
        }
    }

    /// Deletes `route`.
    ///
    /// # Errors
    /// The last error once retries are used up.
    pub(super) async fn delete(&self, route: &Route) -> Result<(), CloudError> {
        let start = Instant::now();
        tracing::info!(route = %route.name, cidr = %route.destination_cidr, target = %route.target_node, blackhole = route.blackhole, "deleting route");
        let result = self
            .retrying(|| self.routes.delete_route(&self.cluster_name, route))
            .await;
        match &result {
            Ok(()) => {
                self.changes.fetch_add(1, Ordering::Relaxed);
                tracing::info!(route = %route.name, cidr = %route.destination_cidr, elapsed = ?start.elapsed(), "deleted route");
            }
            Err(err) => {
                tracing::warn!(route = %route.name, cidr = %route.destination_cidr, elapsed = ?start.elapsed(), error = %err, "could not delete route");
            }
        }
        result
    }

    /// Deletes the routes `create` replaces, then creates its route: a
    /// batch of one ([`RouteOps::create_all`]).
    ///
    /// # Errors
    /// The last error of the failing step; a failed delete skips the create
    /// (the cloud would refuse a second route for the CIDR).
    #[cfg(test)]
    pub(super) async fn create(&self, create: &Create) -> Result<(), CloudError> {
        self.create_all(&[create])
            .await
            .pop()
            .unwrap_or_else(|| Err(CloudError::msg("no result")))
    }
}

impl RouteOps {
    /// Deletes the routes each create replaces, then creates the routes
    /// whose deletes went through in batches of at most the calls allowed
    /// in flight, each batch one [`Routes::create_routes`] call; a route
    /// the batch failed is retried on its own as [`RouteOps::create`]
    /// retries. One result per create, in input order.
    pub(super) async fn create_all(&self, creates: &[&Create]) -> Vec<Result<(), CloudError>> {
        let cleared = join_all(creates.iter().map(|create| async move {
            for old in &create.replaces {
                self.delete(old).await?;
            }
            Ok::<(), CloudError>(())
        }))
        .await;
        let mut results = cleared.clone();
        let ready: Vec<usize> = (0..creates.len()).filter(|i| cleared[*i].is_ok()).collect();
        for chunk in ready.chunks(self.max_in_flight) {
            let batch: Vec<RouteCreate> = chunk
                .iter()
                .map(|i| RouteCreate {
                    name_hint: creates[*i].name_hint.clone(),
                    route: creates[*i].route.clone(),
                })
                .collect();
            for create in &batch {
                tracing::info!(node = %create.route.target_node, cidr = %create.route.destination_cidr, name_hint = %create.name_hint, "creating route");
            }
            let answers = {
                let Ok(_slots) = self
                    .slots
                    .acquire_many(u32::try_from(chunk.len()).unwrap_or(u32::MAX))
                    .await
                else {
                    return vec![Err(CloudError::msg("route operations stopped")); creates.len()];
                };
                match self.routes.create_routes(&self.cluster_name, &batch).await {
                    Ok(answers) if answers.len() == batch.len() => answers,
                    Ok(answers) => vec![
                        Err(CloudError::msg(format!(
                            "the provider answered {} of {} route creates",
                            answers.len(),
                            batch.len()
                        )));
                        batch.len()
                    ],
                    Err(err) => vec![Err(err); batch.len()],
                }
            };
            let retried = join_all(chunk.iter().zip(answers).map(|(i, answer)| async move {
                let route = &creates[*i].route;
                let result = match answer {
                    Err(err) => match retry_delay(&err) {
                        Some(delay) => {
                            tracing::debug!(attempt = 1, error = %err, ?delay, "route create failed; retrying");
                            tokio::time::sleep(delay).await;
                            self.retrying_from(2, || {
                                self.routes.create_route(
                                    &self.cluster_name,
                                    &creates[*i].name_hint,
                                    route,
                                )
                            })
                            .await
                        }
                        None => Err(err),
                    },
                    ok => ok,
                };
                if result.is_ok() {
                    self.changes.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(node = %route.target_node, cidr = %route.destination_cidr, "created route");
                }
                (*i, result)
            }))
            .await;
            for (i, result) in retried {
                results[i] = result;
            }
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use ccm_provider_fake::{FakeCloud, InjectedError, Operation};

    use super::*;

    fn create(node: &str, cidr: &str) -> Create {
        Create {
            route: Route {
                name: format!("uid-{node}"),
                target_node: node.into(),
                target_provider_id: None,
                destination_cidr: cidr.parse().unwrap(),
                blackhole: false,
            },
            name_hint: format!("uid-{node}"),
            replaces: Vec::new(),
        }
    }

    fn fake() -> Arc<FakeCloud> {
        let cloud = FakeCloud::default();
        cloud.set_auto_instances(true);
        Arc::new(cloud)
    }

    fn ops(cloud: &Arc<FakeCloud>, max_in_flight: usize) -> RouteOps {
        RouteOps::new(cloud.clone(), "c1".into(), max_in_flight)
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_until_the_route_exists() {
        let cloud = fake();
        cloud.fail_next(
            Some(Operation::CreateRoute),
            InjectedError::Other("boom".into()),
            2,
        );
        let start = Instant::now();
        ops(&cloud, 10)
            .create(&create("a", "10.244.1.0/24"))
            .await
            .unwrap();
        assert_eq!(cloud.count(Operation::CreateRoute), 3);
        assert_eq!(cloud.routes().len(), 1);
        let waited = start.elapsed();
        assert!(
            waited >= 2 * RETRY_BASE && waited <= 4 * RETRY_BASE,
            "two jittered waits: {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_after_five_attempts() {
        let cloud = fake();
        cloud.fail_next(
            Some(Operation::CreateRoute),
            InjectedError::Other("boom".into()),
            10,
        );
        let err = ops(&cloud, 10)
            .create(&create("a", "10.244.1.0/24"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        assert_eq!(cloud.count(Operation::CreateRoute), ATTEMPTS as usize);
    }

    #[tokio::test(start_paused = true)]
    async fn errors_a_retry_cannot_fix_fail_at_once() {
        let cloud = fake();
        cloud.fail_next(Some(Operation::CreateRoute), InjectedError::NotFound, 1);
        let err = ops(&cloud, 10)
            .create(&create("a", "10.244.1.0/24"))
            .await
            .unwrap_err();
        assert!(matches!(err, CloudError::InstanceNotFound), "{err:?}");
        assert_eq!(cloud.count(Operation::CreateRoute), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_clouds_requested_delay_is_honoured_exactly() {
        let cloud = fake();
        let retry_after = Duration::from_secs(3);
        cloud.fail_next(
            Some(Operation::DeleteRoute),
            InjectedError::Throttled { retry_after },
            1,
        );
        let start = Instant::now();
        ops(&cloud, 10)
            .delete(&create("a", "10.244.1.0/24").route)
            .await
            .unwrap();
        assert_eq!(start.elapsed(), retry_after);
        assert_eq!(cloud.count(Operation::DeleteRoute), 2);

        cloud.fail_next(
            Some(Operation::DeleteRoute),
            InjectedError::Throttled {
                retry_after: Duration::from_secs(60),
            },
            1,
        );
        let err = ops(&cloud, 10)
            .delete(&create("a", "10.244.1.0/24").route)
            .await
            .unwrap_err();
        assert_eq!(
            err.requested_delay(),
            Some(Duration::from_secs(60)),
            "too long to wait within a pass"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn replaced_routes_are_deleted_before_the_create() {
        let cloud = fake();
        let old = create("old", "10.244.1.0/24").route;
        cloud.insert_route("c1", old.clone());
        let mut new = create("a", "10.244.1.0/24");
        new.replaces = vec![old];
        ops(&cloud, 10).create(&new).await.unwrap();
        let order: Vec<_> = cloud.calls().into_iter().map(|c| c.op).collect();
        assert_eq!(order, [Operation::DeleteRoute, Operation::CreateRoute]);
        assert_eq!(cloud.routes()[0].route.target_node, "a");
    }

    #[tokio::test(start_paused = true)]
    async fn only_calls_that_went_through_count_as_changes() {
        let cloud = fake();
        let ops = ops(&cloud, 10);
        let old = create("old", "10.244.1.0/24").route;
        cloud.insert_route("c1", old.clone());
        let mut new = create("a", "10.244.1.0/24");
        new.replaces = vec![old];
        ops.create(&new).await.unwrap();
        assert_eq!(
            ops.changes(),
            2,
            "the replaced route's delete and the create"
        );

        cloud.fail_next(Some(Operation::CreateRoute), InjectedError::NotFound, 1);
        cloud.fail_next(Some(Operation::DeleteRoute), InjectedError::NotFound, 1);
        ops.create(&create("b", "10.244.2.0/24")).await.unwrap_err();
        ops.delete(&new.route).await.unwrap_err();
        assert_eq!(ops.changes(), 2, "failed calls change nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_in_flight_are_bounded() {
        let cloud = fake();
        let latency = Duration::from_millis(100);
        cloud.set_latency(latency);
        let ops = ops(&cloud, 3);
        let creates: Vec<_> = (0..10)
            .map(|i| create(&format!("n{i}"), &format!("10.244.{i}.0/24")))
            .collect();
        let start = Instant::now();
        let results = join_all(creates.iter().map(|c| ops.create(c))).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(
            start.elapsed(),
            4 * latency,
            "10 calls, 3 at a time: 4 rounds"
        );
        assert_eq!(cloud.count(Operation::CreateRoute), 10);
    }
}
