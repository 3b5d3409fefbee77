//! From validated settings to running controllers, and back down on a
//! signal or a lost lease.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider, Environment, InitContext, ProviderFactory};
use ccm_controllers::{SERVICE_OBSERVER, Started};
use ccm_leader_election::{LeaderElectionConfig, LeaderElector, LeaderHandle};
use ccm_runtime::dry_run::Plan;
use ccm_runtime::{Context, Fence, Fenced, Informers, MeteredCloud, Metrics};
use tokio_util::sync::CancellationToken;

mod build;
mod lease_events;

pub(crate) use build::build_provider;
use build::{controller_budgets, controller_clients, controller_settings, review_clients};
use lease_events::LeaseEvents;

use crate::client;
use crate::flags::Settings;
use crate::migration::Migration;
use crate::server::{self, Health};
use crate::serving::{self, Serving};
use crate::supervisor::Supervisor;

/// How a run ends badly.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad input: exit 64.
    Usage(String),
    /// Anything else: exit 1.
    Runtime(String),
}

/// How long controllers and the lease release get after a signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The leader-election handle as the runtime's fence.
#[derive(Debug)]
struct LeaderFence(LeaderHandle);

impl Fence for LeaderFence {
    fn check(&self) -> Result<(), Fenced> {
        self.0.fence().map_err(Fenced::new)
    }

    fn lapses_at(&self) -> Option<tokio::time::Instant> {
        self.0.valid_until()
    }
}

pub(crate) async fn run<F: ProviderFactory>(
    settings: Settings,
    env: Environment,
) -> Result<(), Failure> {
    crate::debug::init(&settings.debugging).await;
    let provider = build_provider::<F>(&settings, &env)?;
    let plan = settings
        .leader_migration
        .plan(&settings.controllers)
        .map_err(Failure::Usage)?;
    let config = client::config(settings.kubeconfig.as_deref(), settings.master.as_deref())
        .await
        .map_err(|e| Failure::Usage(e.to_string()))?;
    // Leader election gets a client of its own, with its own QPS budget, as
    // upstream does: a burst of controller writes queued behind the shared
    // rate limit must never delay a lease renewal past its deadline.
    let user_agent = format!(
        "{}-cloud-controller-manager/{}",
        F::NAME,
        env!("CARGO_PKG_VERSION")
    );
    let lease_client = client::build(
        config.clone(),
        settings.kube_api_qps,
        settings.kube_api_burst,
        &format!("{user_agent}/leader-election"),
    )
    .map_err(|e| Failure::Usage(e.to_string()))?;
    // A dry run's writes are planned, never sent (`client::PlanWrites`).
    let metrics = Metrics::new();
    let dry_run = settings.dry_run.then(|| Plan::new(&metrics));
    let plan_writes = dry_run.clone().map(client::PlanWrites::new);
    let client = client::build_with(
        config.clone(),
        settings.kube_api_qps,
        settings.kube_api_burst,
        &user_agent,
        plan_writes.as_ref(),
    )
    .map_err(|e| Failure::Usage(e.to_string()))?;
    // The shared informers list and watch with a client of their own, as
    // upstream's `shared-informers`, and without kube's transport retries:
    // a watch must see "too large resource version" at once to relist.
    let informer_client = {
        let mut config = config.clone();
        config.default_retry = false;
        client::build(
            config,
            settings.kube_api_qps,
            settings.kube_api_burst,
            &format!("{user_agent}/shared-informers"),
        )
        .map_err(|e| Failure::Usage(e.to_string()))?
    };
    let controller_clients = if settings.use_service_account_credentials && settings.dry_run {
        // Tokens are requested with a write: a dry run has only its own
        // (read-only) credentials.
        tracing::info!(
            "--use-service-account-credentials: ignored with --dry-run, which writes nothing"
        );
        controller_budgets(&settings, &config, &user_agent, plan_writes.as_ref())?
    } else if settings.use_service_account_credentials {
        controller_clients(&settings, &config, &client, &user_agent)?
    } else {
        controller_budgets(&settings, &config, &user_agent, plan_writes.as_ref())?
    };

    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));

    let identity = identity();
    let (elector, leader, election) = match &settings.leader_election {
        // A dry run never leads: it runs beside the CCM that does.
        Some(_) if settings.dry_run => (None, LeaderHandle::always_leader(), None),
        Some(le) => {
            let config = LeaderElectionConfig::new(&le.lease_name, &le.lease_namespace, &identity)
                .with_lease_duration(le.lease_duration)
                .with_renew_deadline(le.renew_deadline)
                .with_retry_period(le.retry_period);
            let elector = LeaderElector::new(lease_client.clone(), config.clone())
                .map_err(|e| Failure::Usage(e.to_string()))?;
            let handle = elector.handle();
            (Some(elector), handle, Some(config))
        }
        None => (None, LeaderHandle::always_leader(), None),
    };

    metrics.register(|registry| {
        registry.register_collector(Box::new(crate::process_metrics::ProcessMetrics));
    });
    if let Some(le) = settings
        .leader_election
        .as_ref()
        .filter(|_| !settings.dry_run)
    {
        let collector = crate::leader_metrics::LeaderMetrics {
            handle: leader.clone(),
            name: le.lease_name.clone(),
        };
        metrics.register(|registry| registry.register_collector(Box::new(collector)));
    }
    let mut cloud = MeteredCloud::new(
        provider,
        metrics.clone(),
        Arc::new(LeaderFence(leader.clone())),
    );
    if let Some(plan) = &dry_run {
        tracing::info!("--dry-run: planning every change instead of making it; no Lease is taken");
        cloud = cloud.dry_run(plan.clone());
    }
    let cloud = Arc::new(cloud);
    let health = Arc::new(Health::default());
    if let Some(config) = &election {
        let lease = format!("{}/{}", config.lease_namespace, config.lease_name);
        health.campaigns_for(lease, leader.clone());
    }
    let mut supervisor = Supervisor::default();
    if let Some(serving) = &settings.serving {
        let addr = serving.addr;
        let listener = serving::bind(addr, serving.permit_port_sharing).map_err(|e| {
            Failure::Runtime(format!(
                "cannot serve on {addr} (--bind-address, --secure-port): {e}"
            ))
        })?;
        let clients = review_clients(serving, &config, &user_agent).await?;
        let secured = Serving::build(serving, clients, &shutdown)
            .await
            .map_err(|e| failure(e.is_usage(), e))?;
        let certificate = match serving.tls.cert {
            serving::CertSource::Generated => "a self-signed certificate made in memory",
            _ => "the configured certificate",
        };
        tracing::info!(%addr, "serving /healthz, /readyz, /livez and /metrics over HTTPS with {certificate}");
        let served = server::serve(
            listener,
            secured,
            health.clone(),
            metrics.clone(),
            cloud.clone(),
            leader.clone(),
            crate::debug::routes(&settings, F::NAME, dry_run.clone()),
            shutdown.clone(),
        );
        supervisor.spawn("the health and metrics server", async move {
            served.await.map_err(|e| e.to_string())
        });
    }

    match &settings.webhook {
        // A shadow refuses nothing: the CCM it runs beside serves admission.
        Some(_) if settings.dry_run => {
            tracing::info!("--dry-run: the admission webhook is not served");
        }
        Some(webhook) => {
            let served =
                crate::admission::start(webhook, cloud.clone(), client.clone(), shutdown.clone())
                    .await
                    .map_err(|e| failure(e.is_usage(), e))?;
            supervisor.spawn("the admission webhook", served);
        }
        None => {}
    }

    cloud
        .initialize(
            &InitContext::new(settings.cluster_name.clone()).with_identity(identity.clone()),
        )
        .await
        .map_err(|e| initialize_failure(F::NAME, &e))?;
    health.initialized.store(true, Ordering::SeqCst);

    // The lease is released only after the controllers stopped: cancelling
    // this token is the last step of a graceful shutdown.
    let release = CancellationToken::new();
    let mut elector_task = elector.map(|elector| tokio::spawn(elector.run(release.clone())));
    tracing::info!(%identity, "waiting to lead");
    let mut leading = leader.watch();
    tokio::select! {
        biased;
        () = shutdown.cancelled() => {
            stop_tasks(supervisor).await;
            return finish(elector_task, &release).await;
        }
        result = leading.wait_for(|leads| *leads) => {
            if result.is_err() {
                return Err(Failure::Runtime("leader election stopped before this process led".into()));
            }
        }
        joined = elector_ended(&mut elector_task) => {
            shutdown.cancel();
            stop_tasks(supervisor).await;
            return Err(Failure::Runtime(format!(
                "leader election stopped before this process led: {joined}"
            )));
        }
        why = supervisor.first_failure(&shutdown) => {
            shutdown.cancel();
            stop_tasks(supervisor).await;
            let _ = finish(elector_task, &release).await;
            return Err(Failure::Runtime(why));
        }
    }
    tracing::info!(%identity, "leading: starting controllers");
    let lease_events = election.as_ref().map(|config| {
        LeaseEvents::new(
            client.clone(),
            &config.lease_namespace,
            &config.lease_name,
            &leader,
            &identity,
        )
    });
    if let Some(events) = lease_events.clone() {
        tokio::spawn(async move { events.became_leader().await });
    }

    let ctx = Context {
        client: client.clone(),
        cloud,
        metrics,
        cluster_name: settings.cluster_name.clone(),
        identity,
        informers: Arc::new(Informers::new(informer_client)),
        shutdown: shutdown.clone(),
    };
    health.watches(ctx.informers.clone());
    let controller_settings = controller_settings(&settings);
    for (n, id) in plan.main.iter().enumerate() {
        // Upstream's --controller-start-interval: a pause between starts.
        if n > 0 && !settings.controller_start_interval.is_zero() {
            tokio::time::sleep(settings.controller_start_interval).await;
        }
        // Each controller writes through a client (and a rate limit) of its
        // own; with --use-service-account-credentials, as its own
        // ServiceAccount.
        let own = controller_clients.context_for(*id, &ctx);
        match ccm_controllers::start(*id, &own, &controller_settings) {
            Started::Running(future) => {
                tracing::info!(controller = %id, "started");
                ctx.metrics.set_controller_running(id.alias(), true);
                supervisor.spawn_unit(format!("controller {id}"), future);
            }
            Started::Off(reason) => {
                tracing::info!(controller = %id, "off: {reason}");
                ctx.metrics.set_controller_running(id.alias(), false);
            }
        }
    }
    // The provider's own controllers (AWS's tagging, nodeipam), under the
    // main Lease.
    for spec in &settings.provider_controllers.enabled {
        let own = &settings.provider_controllers.settings;
        match ccm_controllers::start_provider_controller(spec, &ctx, &controller_settings, own) {
            Started::Running(future) => {
                tracing::info!(controller = spec.name, "started");
                ctx.metrics.set_controller_running(spec.name, true);
                supervisor.spawn_unit(format!("controller {}", spec.name), future);
            }
            Started::Off(reason) => {
                tracing::info!(controller = spec.name, "off: {reason}");
                ctx.metrics.set_controller_running(spec.name, false);
            }
        }
    }
    // Not one of upstream's controllers: it runs, under the main Lease,
    // whenever the provider observes Services.
    match ccm_controllers::start_service_observer(&ctx) {
        Started::Running(future) => {
            tracing::info!(controller = SERVICE_OBSERVER, "started");
            ctx.metrics.set_controller_running(SERVICE_OBSERVER, true);
            supervisor.spawn_unit(format!("controller {SERVICE_OBSERVER}"), future);
        }
        Started::Off(reason) => tracing::debug!(controller = SERVICE_OBSERVER, "off: {reason}"),
    }
    let informers = ctx.informers.clone();
    let informers_stop = shutdown.clone();
    supervisor.spawn("the informers", async move {
        informers
            .run(informers_stop)
            .await
            .map_err(|e| e.to_string())
    });
    let informers = ctx.informers.clone();
    let synced = health.clone();
    tokio::spawn(async move {
        informers.wait_until_ready().await;
        synced.synced.store(true, Ordering::SeqCst);
        tracing::info!("caches filled");
    });
    let mut migration = Migration::start(
        &plan,
        election.as_ref(),
        lease_client,
        &leader,
        &ctx,
        &health,
        &controller_settings,
        controller_clients,
    )
    .map_err(|e| Failure::Usage(e.to_string()))?;

    let failed = tokio::select! {
        biased;
        () = shutdown.cancelled() => None,
        lost = migration.lost() => {
            shutdown.cancel();
            release.cancel();
            stopped_leading(lease_events.as_ref()).await;
            return Err(Failure::Runtime(lost));
        }
        joined = elector_ended(&mut elector_task) => {
            // The elector only stops on its own when leadership is lost.
            shutdown.cancel();
            release.cancel();
            stopped_leading(lease_events.as_ref()).await;
            return Err(Failure::Runtime(joined));
        }
        why = supervisor.first_failure(&shutdown) => {
            tracing::error!("{why}; stopping, so that a standby takes over");
            Some(why)
        }
    };
    shutdown.cancel();
    tracing::info!("stopping controllers");
    stop_tasks(supervisor).await;
    // The migration Lease goes first: the main one guards the whole process.
    let migrated = migration.stop().await.map_err(Failure::Runtime);
    stopped_leading(lease_events.as_ref()).await;
    let finished = finish(elector_task, &release).await;
    match failed {
        Some(why) => Err(Failure::Runtime(why)),
        None => migrated.and(finished),
    }
}

/// Records that this process stopped leading, when it elected to lead.
async fn stopped_leading(events: Option<&LeaseEvents>) {
    if let Some(events) = events {
        events.stopped_leading().await;
    }
}

/// Bad input (exit 64) when `usage`, else a runtime failure.
/// A provider's `initialize` failure: exit 64 when the configuration is
/// what is wrong ([`CloudError::InvalidInput`], for example a cluster
/// nothing names), else exit 1.
pub(crate) fn initialize_failure(provider: &str, error: &CloudError) -> Failure {
    let usage = matches!(error, CloudError::InvalidInput { .. });
    failure(
        usage,
        format!("the {provider} provider could not initialize: {error}"),
    )
}

fn failure(usage: bool, error: impl std::fmt::Display) -> Failure {
    if usage {
        Failure::Usage(error.to_string())
    } else {
        Failure::Runtime(error.to_string())
    }
}

/// Waits up to [`SHUTDOWN_GRACE`] for every task to stop (shutdown was
/// asked for).
async fn stop_tasks(supervisor: Supervisor) {
    if tokio::time::timeout(SHUTDOWN_GRACE, supervisor.join_all())
        .await
        .is_err()
    {
        tracing::warn!("controllers did not stop within {SHUTDOWN_GRACE:?}");
    }
}

/// The elector task.
type ElectorTask = tokio::task::JoinHandle<Result<(), ccm_leader_election::Error>>;

/// Waits for the elector to end, and says how; never resolves without one.
async fn elector_ended(task: &mut Option<ElectorTask>) -> String {
    let Some(handle) = task.as_mut() else {
        return std::future::pending().await;
    };
    let joined = handle.await;
    *task = None;
    match joined {
        Ok(Err(err)) => err.to_string(),
        Ok(Ok(())) => "leader election ended unexpectedly".into(),
        Err(err) => format!("leader election panicked: {err}"),
    }
}

/// Releases the lease (the controllers have stopped) and waits for the
/// elector to finish.
async fn finish(
    elector_task: Option<ElectorTask>,
    release: &CancellationToken,
) -> Result<(), Failure> {
    release.cancel();
    let Some(task) = elector_task else {
        return Ok(());
    };
    match tokio::time::timeout(SHUTDOWN_GRACE, task).await {
        Ok(Ok(Ok(()))) => {
            tracing::info!("stopped; lease released");
            Ok(())
        }
        Ok(Ok(Err(err))) => Err(Failure::Runtime(err.to_string())),
        Ok(Err(err)) => Err(Failure::Runtime(format!("leader election panicked: {err}"))),
        Err(_) => Err(Failure::Runtime(
            "the lease was not released in time".into(),
        )),
    }
}

/// Upstream's identity: the host name and a unique suffix.
fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "localhost".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!(
        "{host}_{:016x}",
        (nanos as u64) ^ (u64::from(std::process::id()) << 32)
    )
}

async fn cancel_on_signal(shutdown: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}
