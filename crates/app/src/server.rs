//! The HTTPS endpoints: `/healthz`, `/livez`, `/readyz`, `/metrics`, served
//! by [`crate::serving`] behind delegated authentication and authorization.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use ccm_runtime::{Informers, Metrics, Running, STALLED_AFTER};
use cloud_provider::CloudProvider;
use leader_election::{LeaderHandle, NotLeader};
use tokio_util::sync::CancellationToken;

/// What the health endpoints report.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// The provider is initialized and the client built.
    pub(crate) initialized: AtomicBool,
    /// This process leads and its controllers' caches are filled.
    pub(crate) synced: AtomicBool,
    /// The leader's informers, whose watches must make progress.
    pub(crate) informers: OnceLock<Arc<Informers>>,
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
    serving: crate::serving::Serving,
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
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/debug/flags/v", axum::routing::put(set_verbosity))
        .with_state(state)
        .merge(debug_routes);
    crate::serving::serve(listener, serving, router, shutdown).await
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

/// Healthy unless this process leads but has not renewed its lease in time
/// (it is about to lose leadership), or a controller is stalled (a
/// reconcile has run past `STALLED_AFTER`): either way it should be
/// restarted. A controller that died has already stopped the process.
async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    health(
        state.leader.is_leading(),
        state.leader.fence(),
        state.metrics.longest_reconcile(),
    )
}

/// The `/healthz` answer: the elector still counts itself leader (`leading`)
/// while the fence already refuses, so the lease went unrenewed; or the
/// longest running reconcile has run too long.
fn health(
    leading: bool,
    fence: Result<(), NotLeader>,
    longest: Option<Running>,
) -> (StatusCode, String) {
    if let Err(err) = fence
        && leading
    {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("leaderElection failed: {err}\n"),
        );
    }
    if let Some(running) = longest.filter(|r| r.running_for >= STALLED_AFTER) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "controller {} stalled: its reconcile of {} has run for {}s\n",
                running.controller,
                running.object,
                running.running_for.as_secs()
            ),
        );
    }
    (StatusCode::OK, "ok\n".to_owned())
}

/// Ready once initialized; a leader also needs its caches filled and every
/// watch making progress (no error without an event since, for
/// `WATCH_ERROR_WINDOW`). Standby replicas are ready: they serve metrics
/// and wait to lead.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if !state.health.initialized.load(Ordering::SeqCst) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: initializing\n".to_owned(),
        );
    }
    if state.leader.is_leader() && !state.health.synced.load(Ordering::SeqCst) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: filling caches\n".to_owned(),
        );
    }
    if state.leader.is_leader()
        && let Some(informers) = state.health.informers.get()
        && let Some((kind, error)) = informers.watch_errors().into_iter().next()
    {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the {kind} watch makes no progress: {error}\n"),
        );
    }
    (StatusCode::OK, "ok\n".to_owned())
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

    #[test]
    fn healthz_fails_when_leading_with_an_unrenewed_lease() {
        let expired = Err(NotLeader::Expired {
            expired_for: Duration::from_secs(3),
        });
        let (status, body) = health(true, expired, None);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.starts_with("leaderElection failed"), "{body}");
    }

    #[test]
    fn healthz_passes_for_a_renewed_leader_and_for_standbys() {
        assert_eq!(health(true, Ok(()), None).0, StatusCode::OK);
        assert_eq!(
            health(false, Err(NotLeader::NotElected), None).0,
            StatusCode::OK
        );
    }

    #[test]
    fn healthz_fails_when_a_reconcile_runs_past_the_stall_limit() {
        let running = |secs| Running {
            controller: "service",
            object: "default/web".into(),
            running_for: Duration::from_secs(secs),
        };
        let (status, _) = health(true, Ok(()), Some(running(60)));
        assert_eq!(status, StatusCode::OK, "a long reconcile is not a stall");
        let (status, body) = health(true, Ok(()), Some(running(STALLED_AFTER.as_secs())));
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "controller service stalled: its reconcile of default/web has run for 900s\n"
        );
    }
}
