//! [`Migration`]: the migration Lease's elector and the controllers it
//! guards, run beside the main Lease's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ccm_controllers::{ControllerId, ControllerSettings, Started};
use ccm_leader_election::{ConfigError, LeaderElectionConfig, LeaderElector, LeaderHandle};
use ccm_runtime::{Context, Fence, Fenced, Informers, MeteredCloud};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::plan::{Plan, list};
use crate::client::service_account::ControllerClients;
use crate::server::Health;
use crate::supervisor::Supervisor;

/// How long the migrated controllers and the migration Lease's release get
/// after a signal (as the main ones).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The fence of migrated controllers: both Leases must be held and renewed.
#[derive(Debug)]
struct BothLeases {
    main: LeaderHandle,
    migration: LeaderHandle,
    lease: String,
}

impl Fence for BothLeases {
    fn check(&self) -> Result<(), Fenced> {
        self.main.fence().map_err(Fenced::new)?;
        self.migration
            .fence()
            .map_err(|err| Fenced::new(format!("migration lease {}: {err}", self.lease)))
    }

    /// The earlier of the two terms' ends.
    fn lapses_at(&self) -> Option<tokio::time::Instant> {
        match (self.main.valid_until(), self.migration.valid_until()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The migration Lease and its controllers, running in a task of their own.
///
/// Inert when leader migration is off.
#[derive(Debug)]
pub(crate) struct Migration {
    task: Option<JoinHandle<Result<(), String>>>,
}

impl Migration {
    /// Starts campaigning for the migration Lease, which `plan` names, with
    /// the namespace, identity and timings of the main Lease's `election`.
    /// Call it once this process leads on the main Lease, as upstream does;
    /// the migrated controllers start once the migration Lease is held too.
    ///
    /// They get a context of their own: `ctx` with informers started when
    /// they start (upstream's controller context per Lease, so a kind both
    /// sets of controllers use is watched twice during a migration), and the
    /// same provider behind a fence that also checks the migration Lease.
    /// `health` checks the migration Lease's term (liveness) and those
    /// informers' watches (readiness) from now on.
    ///
    /// # Errors
    /// When the migration Lease's configuration is invalid.
    #[expect(
        clippy::too_many_arguments,
        reason = "each is an independent part of the process, built in start.rs"
    )]
    pub(crate) fn start(
        plan: &Plan,
        election: Option<&LeaderElectionConfig>,
        lease_client: kube::Client,
        main: &LeaderHandle,
        ctx: &Context,
        health: &Health,
        settings: &ControllerSettings,
        clients: ControllerClients,
    ) -> Result<Self, ConfigError> {
        let (Some(lease_name), Some(election)) = (&plan.migration_lease, election) else {
            return Ok(Self { task: None });
        };
        let config = LeaderElectionConfig {
            lease_name: lease_name.clone(),
            ..election.clone()
        };
        let lease = format!("{}/{}", config.lease_namespace, config.lease_name);
        let elector = LeaderElector::new(lease_client, config)?;
        let handle = elector.handle();
        let fence = BothLeases {
            main: main.clone(),
            migration: handle.clone(),
            lease: lease.clone(),
        };
        let migrated_ctx = Context {
            cloud: Arc::new(MeteredCloud::new(
                ctx.cloud.inner().clone(),
                ctx.metrics.clone(),
                Arc::new(fence),
            )),
            informers: Arc::new(Informers::new(ctx.informers.client().clone())),
            ..ctx.clone()
        };
        health.campaigns_for(lease.clone(), handle.clone());
        health.watches(migrated_ctx.informers.clone());
        for id in &plan.migrated {
            migrated_ctx
                .metrics
                .set_controller_running(id.alias(), false);
        }
        let task = tokio::spawn(supervise(
            elector,
            handle,
            lease,
            plan.migrated.clone(),
            migrated_ctx,
            settings.clone(),
            clients,
        ));
        Ok(Self { task: Some(task) })
    }

    /// Resolves when the migration Lease was lost (or its task failed),
    /// with why; never otherwise. Cancel-safe, for `select!`.
    pub(crate) async fn lost(&mut self) -> String {
        if let Some(task) = self.task.as_mut() {
            let outcome = joined(task.await);
            self.task = None;
            if let Err(message) = outcome {
                return message;
            }
        }
        std::future::pending().await
    }

    /// Waits, after the process's shutdown token was cancelled, until the
    /// migrated controllers stopped and the migration Lease was released.
    ///
    /// # Errors
    /// When the Lease was lost meanwhile or not released in time.
    pub(crate) async fn stop(self) -> Result<(), String> {
        let Some(task) = self.task else {
            return Ok(());
        };
        match tokio::time::timeout(2 * SHUTDOWN_GRACE, task).await {
            Ok(outcome) => joined(outcome),
            Err(_) => Err("the migration lease was not released in time".into()),
        }
    }
}

fn joined(outcome: Result<Result<(), String>, tokio::task::JoinError>) -> Result<(), String> {
    outcome.unwrap_or_else(|err| Err(format!("leader migration panicked: {err}")))
}

/// Campaigns for the migration Lease, runs `ids` while holding it, and on
/// shutdown stops them and then releases it.
async fn supervise(
    elector: LeaderElector,
    handle: LeaderHandle,
    lease: String,
    ids: BTreeSet<ControllerId>,
    ctx: Context,
    settings: ControllerSettings,
    clients: ControllerClients,
) -> Result<(), String> {
    let release = CancellationToken::new();
    let mut election = tokio::spawn(elector.run(release.clone()));
    tracing::info!(
        %lease,
        controllers = %list(&ids),
        "leader migration: waiting for the migration lease before starting the migrated controllers"
    );
    let mut leading = handle.watch();
    tokio::select! {
        // The handle keeps the sender alive, so this only resolves leading.
        () = async { drop(leading.wait_for(|leads| *leads).await) } => {}
        () = ctx.shutdown.cancelled() => {
            release.cancel();
            return released(election, &lease).await;
        }
        outcome = &mut election => return Err(ended(outcome, &lease)),
    }
    tracing::info!(
        %lease,
        controllers = %list(&ids),
        "leader migration: acquired the migration lease; starting the migrated controllers"
    );
    let mut tasks = start_controllers(&ids, &ctx, &settings, &clients);
    tokio::select! {
        biased;
        () = ctx.shutdown.cancelled() => {}
        outcome = &mut election => return Err(ended(outcome, &lease)),
        // A migrated controller or its informers ending early stops the
        // process, as one of the main ones does (the tasks are dropped
        // with the supervisor; the Lease then expires).
        why = tasks.first_failure(&ctx.shutdown) => {
            return Err(format!("leader migration: {why}"));
        }
    }
    if tokio::time::timeout(SHUTDOWN_GRACE, tasks.join_all())
        .await
        .is_err()
    {
        tracing::warn!("migrated controllers did not stop within {SHUTDOWN_GRACE:?}");
    }
    release.cancel();
    released(election, &lease).await
}

/// Starts `ids` on `ctx` and the informers they asked for, supervised.
fn start_controllers(
    ids: &BTreeSet<ControllerId>,
    ctx: &Context,
    settings: &ControllerSettings,
    clients: &ControllerClients,
) -> Supervisor {
    let mut tasks = Supervisor::default();
    for id in ids {
        match ccm_controllers::start(*id, &clients.context_for(*id, ctx), settings) {
            Started::Running(future) => {
                tracing::info!(controller = %id, "started (migrated)");
                ctx.metrics.set_controller_running(id.alias(), true);
                tasks.spawn_unit(format!("controller {id}"), future);
            }
            Started::Off(reason) => tracing::info!(controller = %id, "off: {reason}"),
        }
    }
    let informers = ctx.informers.clone();
    let stop = ctx.shutdown.clone();
    tasks.spawn("the migrated controllers' informers", async move {
        informers.run(stop).await.map_err(|e| e.to_string())
    });
    tasks
}

/// Why the migration Lease's elector ended on its own: it only does when
/// leadership was lost.
fn ended(
    outcome: Result<Result<(), ccm_leader_election::Error>, tokio::task::JoinError>,
    lease: &str,
) -> String {
    match outcome {
        Ok(Err(err)) => format!("leader migration: {err}"),
        Ok(Ok(())) => format!("leader migration: the election on {lease} ended unexpectedly"),
        Err(err) => format!("leader migration: the election on {lease} panicked: {err}"),
    }
}

/// Waits for the elector to release the Lease after `release` was
/// cancelled.
async fn released(
    election: JoinHandle<Result<(), ccm_leader_election::Error>>,
    lease: &str,
) -> Result<(), String> {
    match tokio::time::timeout(SHUTDOWN_GRACE, election).await {
        Ok(Ok(Ok(()))) => {
            tracing::info!(%lease, "leader migration: migration lease released");
            Ok(())
        }
        Ok(outcome) => Err(ended(outcome, lease)),
        Err(_) => Err(format!(
            "the migration lease {lease} was not released in time"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle of a candidate that has not acquired its Lease (nothing is
    /// sent: the elector never runs).
    fn candidate() -> LeaderHandle {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        LeaderElector::new(client, LeaderElectionConfig::new("m", "kube-system", "me"))
            .unwrap()
            .handle()
    }

    fn fence(main: LeaderHandle, migration: LeaderHandle) -> BothLeases {
        BothLeases {
            main,
            migration,
            lease: "kube-system/m".to_owned(),
        }
    }

    #[tokio::test]
    async fn migrated_mutations_need_both_leases() {
        let refused = fence(LeaderHandle::always_leader(), candidate())
            .check()
            .unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("migration lease kube-system/m: "),
            "{refused}"
        );
        let refused = fence(candidate(), LeaderHandle::always_leader())
            .check()
            .unwrap_err();
        assert!(!refused.to_string().contains("migration"), "{refused}");
        fence(LeaderHandle::always_leader(), LeaderHandle::always_leader())
            .check()
            .unwrap();
    }
}
