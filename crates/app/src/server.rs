//! The HTTPS endpoints: `/healthz`, `/livez`, `/readyz` (and a path per
//! check under each), `/metrics`, served by [`crate::serving`] behind
//! delegated authentication and authorization.

mod health;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use ccm_cloud_provider::CloudProvider;
use ccm_leader_election::{LeaderHandle, NotLeader};
use ccm_runtime::{Informers, Metrics, Running, STALLED_AFTER};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use health::Check;

/// What the health endpoints report.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// The provider is initialized and the client built.
    pub(crate) initialized: AtomicBool,
    /// This process leads and its controllers' caches are filled.
    pub(crate) synced: AtomicBool,
    /// The leader's informers, whose watches must make progress: the main
    /// controllers', and with leader migration the migrated ones'.
    informers: Mutex<Vec<Arc<Informers>>>,
    /// Every Lease this process campaigns for, whose terms must be renewed
    /// while it leads on them.
    leases: Mutex<Vec<Campaign>>,
}

/// A Lease this process campaigns for.
#[derive(Debug)]
struct Campaign {
    /// `namespace/name`.
    lease: String,
    handle: LeaderHandle,
}

impl Health {
    /// Liveness checks from now on that `handle`'s term on `lease`
    /// (`namespace/name`) is renewed whenever the handle says it leads.
    pub(crate) fn campaigns_for(&self, lease: String, handle: LeaderHandle) {
        self.leases.lock().push(Campaign { lease, handle });
    }

    /// Readiness checks from now on, while this process leads, that the
    /// watches of `informers` make progress.
    pub(crate) fn watches(&self, informers: Arc<Informers>) {
        self.informers.lock().push(informers);
    }

    /// Each Lease's term as liveness judges it, read now.
    fn terms(&self) -> Vec<Term> {
        self.leases
            .lock()
            .iter()
            .map(|campaign| Term {
                lease: campaign.lease.clone(),
                leading: campaign.handle.is_leading(),
                fence: campaign.handle.fence(),
            })
            .collect()
    }

    /// The first watch that makes no progress, as `(kind, its last error)`.
    fn stuck_watch(&self) -> Option<(&'static str, String)> {
        self.informers
            .lock()
            .iter()
            .find_map(|informers| informers.watch_errors().into_iter().next())
    }
}

/// What the elector of one Lease says: whether it counts itself leader,
/// and whether its fence lets a mutation through.
#[derive(Debug)]
struct Term {
    /// `namespace/name`.
    lease: String,
    leading: bool,
    fence: Result<(), NotLeader>,
}

#[derive(Clone)]
struct AppState {
    health: Arc<Health>,
    metrics: Metrics,
    cloud: Arc<dyn CloudProvider>,
    leader: LeaderHandle,
}

/// Serves the endpoints over TLS on `listener`, behind `serving`'s
/// authentication and authorization, until `shutdown`.
#[expect(
    clippy::too_many_arguments,
    reason = "each is an independent part of the server, built in start.rs"
)]
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    mut serving: crate::serving::Serving,
    health: Arc<Health>,
    metrics: Metrics,
    cloud: Arc<dyn CloudProvider>,
    leader: LeaderHandle,
    debug_routes: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let state = AppState {
        health,
        metrics,
        cloud,
        leader,
    };
    let router = health_routes()
        .route("/metrics", get(metrics_text))
        .route("/debug/flags/v", axum::routing::put(set_verbosity))
        .with_state(state)
        .merge(debug_routes);
    let router = serving.guard_routes(router);
    crate::serving::serve(listener, serving, router, shutdown).await
}

/// The checks of `/healthz` and `/livez`.
const LIVENESS: [&str; 3] = ["ping", "leaderElection", "controllers"];
/// The checks of `/readyz`.
const READINESS: [&str; 4] = ["ping", "provider-initialized", "informer-sync", "watches"];

/// `/healthz`, `/livez`, `/readyz` and one path per check under each (each
/// named, so a made-up check name is an unknown path).
fn health_routes() -> Router<AppState> {
    let mut router = Router::new();
    for (endpoint, names) in [
        ("healthz", &LIVENESS[..]),
        ("livez", &LIVENESS[..]),
        ("readyz", &READINESS[..]),
    ] {
        let checks = move |state: &AppState| {
            if endpoint == "readyz" {
                readiness(state).to_vec()
            } else {
                liveness(state).to_vec()
            }
        };
        router = router.route(
            &format!("/{endpoint}"),
            get(
                move |State(state): State<AppState>, RawQuery(query): RawQuery| async move {
                    health::root(endpoint, &checks(&state), health::verbose(query.as_deref()))
                },
            ),
        );
        for &name in names {
            router = router.route(
                &format!("/{endpoint}/{name}"),
                get(move |State(state): State<AppState>| async move {
                    let checks = checks(&state);
                    match checks.iter().find(|c| c.name == name) {
                        Some(check) => health::single(check),
                        None => StatusCode::NOT_FOUND.into_response(),
                    }
                }),
            );
        }
    }
    router
}

/// Upstream's `PUT /debug/flags/v`: the body is the new `--v`.
async fn set_verbosity(body: String) -> (StatusCode, String) {
    match body.trim().parse::<u8>() {
        Ok(v) => {
            let previous = crate::logging::set_verbosity(v);
            tracing::info!(from = previous, to = v, "log verbosity changed");
            (
                StatusCode::OK,
                format!("successfully set klog.logging.verbosity to {v}"),
            )
        }
        Err(_) => (
            StatusCode::BAD_REQUEST,
            format!("`{}` is not a verbosity from 0 to 255\n", body.trim()),
        ),
    }
}

/// Alive unless this process leads on a Lease (the main one, or with
/// leader migration the migration Lease) but has not renewed it in time (it
/// is about to lose leadership), or a controller is stalled (a reconcile has
/// run past `STALLED_AFTER`): either way it should be restarted. A
/// controller that died has already stopped the process.
fn liveness(state: &AppState) -> [Check; 3] {
    checks_of_liveness(&state.health.terms(), state.metrics.longest_reconcile())
}

/// The [`LIVENESS`] checks: on some Lease the elector still counts itself
/// leader while the fence already refuses, so that Lease went unrenewed
/// (each such Lease named); the longest running reconcile has run too long.
fn checks_of_liveness(terms: &[Term], longest: Option<Running>) -> [Check; 3] {
    let [ping, leader_election, controllers] = LIVENESS;
    let unrenewed: Vec<String> = terms
        .iter()
        .filter(|term| term.leading)
        .filter_map(|term| {
            let err = term.fence.as_ref().err()?;
            Some(format!("lease {}: {err}", term.lease))
        })
        .collect();
    let leader_election = if unrenewed.is_empty() {
        Check::passed(leader_election)
    } else {
        Check::failed(leader_election, unrenewed.join("; "))
    };
    let controllers = match longest.filter(|r| r.running_for >= STALLED_AFTER) {
        Some(running) => Check::failed(
            controllers,
            format!(
                "controller {} stalled: its reconcile of {} has run for {}s",
                running.controller,
                running.object,
                running.running_for.as_secs()
            ),
        ),
        None => Check::passed(controllers),
    };
    [Check::passed(ping), leader_election, controllers]
}

/// Ready once initialized; a leader also needs its caches filled and every
/// watch making progress, the migrated controllers' too (no error unless an
/// event or a successful list or watch request came after it:
/// `Informer::watch_error`). Standby replicas are ready: they serve metrics
/// and wait to lead.
fn readiness(state: &AppState) -> [Check; 4] {
    let [ping, initialized, synced, watches] = READINESS;
    let leader = state.leader.is_leader();
    let initialized = if state.health.initialized.load(Ordering::SeqCst) {
        Check::passed(initialized)
    } else {
        Check::failed(initialized, "the provider is initializing".to_owned())
    };
    let synced = if leader && !state.health.synced.load(Ordering::SeqCst) {
        Check::failed(synced, "the controllers' caches are filling".to_owned())
    } else {
        Check::passed(synced)
    };
    let stuck = leader.then(|| state.health.stuck_watch()).flatten();
    let watches = match stuck {
        Some((kind, error)) => Check::failed(
            watches,
            format!("the {kind} watch makes no progress: {error}"),
        ),
        None => Check::passed(watches),
    };
    [Check::passed(ping), initialized, synced, watches]
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    let body = state.metrics.encode(Some(state.cloud.as_ref()));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn put_debug_flags_v_changes_the_verbosity_of_a_running_process() {
        let before = crate::logging::verbosity();
        let (status, body) = set_verbosity("4\n".to_owned()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "successfully set klog.logging.verbosity to 4");
        assert_eq!(crate::logging::verbosity(), 4);
        let (status, _) = set_verbosity("loud".to_owned()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            crate::logging::verbosity(),
            4,
            "a bad value changes nothing"
        );
        crate::logging::set_verbosity(before);
    }

    /// The outcome of the check `name` among `checks`.
    fn outcome(checks: &[Check], name: &str) -> Result<(), String> {
        checks
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.outcome.clone())
            .unwrap()
    }

    const MAIN: &str = "kube-system/cloud-controller-manager";
    const MIGRATION: &str = "kube-system/cloud-provider-extraction-migration";

    fn renewed(lease: &str) -> Term {
        Term {
            lease: lease.to_owned(),
            leading: true,
            fence: Ok(()),
        }
    }

    fn expired(lease: &str) -> Term {
        Term {
            lease: lease.to_owned(),
            leading: true,
            fence: Err(NotLeader::Expired {
                expired_for: Duration::from_secs(3),
            }),
        }
    }

    fn standby(lease: &str) -> Term {
        Term {
            lease: lease.to_owned(),
            leading: false,
            fence: Err(NotLeader::NotElected),
        }
    }

    #[test]
    fn liveness_fails_when_leading_with_an_unrenewed_lease() {
        let checks = checks_of_liveness(&[expired(MAIN)], None);
        assert_eq!(
            outcome(&checks, "leaderElection"),
            Err(format!(
                "lease {MAIN}: leadership expired 3s ago: the lease was not renewed in time"
            ))
        );
        assert_eq!(outcome(&checks, "controllers"), Ok(()));
    }

    #[test]
    fn liveness_fails_naming_an_unrenewed_migration_lease_when_the_main_one_is_renewed() {
        let checks = checks_of_liveness(&[renewed(MAIN), expired(MIGRATION)], None);
        let reason = outcome(&checks, "leaderElection").unwrap_err();
        assert!(
            reason.starts_with(&format!("lease {MIGRATION}: ")),
            "{reason}"
        );
        assert!(reason.contains("expired"), "{reason}");
        assert!(!reason.contains(MAIN), "{reason}");
    }

    #[test]
    fn liveness_passes_for_renewed_leases_and_for_standbys() {
        let passes = |terms: &[Term]| {
            checks_of_liveness(terms, None)
                .iter()
                .all(|c| c.outcome.is_ok())
        };
        assert!(passes(&[]), "no Lease: --leader-elect=false");
        assert!(passes(&[renewed(MAIN), renewed(MIGRATION)]));
        assert!(passes(&[renewed(MAIN), standby(MIGRATION)]));
        assert!(passes(&[standby(MAIN), standby(MIGRATION)]));
    }

    #[test]
    fn liveness_fails_when_a_reconcile_runs_past_the_stall_limit() {
        let running = |secs| Running {
            controller: "service",
            object: "default/web".into(),
            running_for: Duration::from_secs(secs),
        };
        let checks = checks_of_liveness(&[renewed(MAIN)], Some(running(60)));
        assert_eq!(
            outcome(&checks, "controllers"),
            Ok(()),
            "a long reconcile is not a stall"
        );
        let checks = checks_of_liveness(&[renewed(MAIN)], Some(running(STALLED_AFTER.as_secs())));
        assert_eq!(
            outcome(&checks, "controllers"),
            Err("controller service stalled: its reconcile of default/web has run for 900s".into())
        );
    }
}
