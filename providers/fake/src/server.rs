//! The fake cloud as its own process: one cloud that several CCM replicas
//! share over loopback HTTP, whose state outlives any of them, with a call
//! log naming the replica behind each call, fault settings, and a crash
//! trap for the chaos suites.
//!
//! | request | answer |
//! |---|---|
//! | `POST /v1/<operation>` | one interface call (JSON [`Args`](crate::remote) in, JSON answer out), made by [`RemoteCloud`](crate::RemoteCloud) |
//! | `GET /state` | instances, load balancers (name, Service, nodes) and routes |
//! | `GET /calls?since=N` | the call log from sequence number `N`: operation, arguments, caller, times, outcome |
//! | `GET /limits` | the batch sizes clients must respect |
//! | `PUT /faults` | `latency_ms`, `error_rate` (mixed throttling, 503s and timeouts), `rate_limit_qps`, `rate_limit_burst` |
//! | `POST /crash` `{"after_mutations": k}` | traps the k-th successful mutation from now: it is applied, then it and every later call wait, unanswered, until `DELETE /crash` |
//! | `GET /crash` | `armed`, `tripped`, `mutations` |

mod faults;
mod handlers;
mod log;
mod trap;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use parking_lot::Mutex;
use tokio::net::TcpListener;

use crate::FakeCloud;

pub use log::ServerCall;

/// The shared state of a serving fake cloud.
#[derive(Debug)]
struct Shared {
    cloud: FakeCloud,
    log: Mutex<Vec<ServerCall>>,
    faults: Mutex<faults::ServerFaults>,
    trap: trap::Trap,
}

/// Serves `cloud` on `listener` until the future is dropped.
///
/// # Errors
/// When accepting connections fails.
pub async fn serve(listener: TcpListener, cloud: FakeCloud, seed: u64) -> std::io::Result<()> {
    let shared = Arc::new(Shared {
        cloud,
        log: Mutex::new(Vec::new()),
        faults: Mutex::new(faults::ServerFaults::new(seed)),
        trap: trap::Trap::default(),
    });
    axum::serve(listener, router(shared)).await
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/{op}", post(handlers::call))
        .route("/state", get(handlers::state))
        .route("/calls", get(handlers::calls))
        .route("/limits", get(handlers::limits))
        .route("/faults", put(handlers::faults))
        .route(
            "/crash",
            post(handlers::arm)
                .get(handlers::trap_status)
                .delete(handlers::release),
        )
        // A call names every node a load balancer serves: at 10,000 nodes
        // that is near axum's default limit of 2 MB; clusters the fake
        // cloud stands in for are bounded well below this.
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(shared)
}

/// The largest request body the server reads.
const MAX_BODY: usize = 64 << 20;

/// Whether `addr` is loopback: the server refuses to listen anywhere else.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}
