//! A crash trap in front of moto: an HTTP proxy on loopback that counts the
//! AWS calls that change something (by their `Action`) and, once armed for
//! k, lets the k-th such call reach moto and be applied, then holds its
//! answer, and every later request unsent, until released, so the harness
//! can kill the CCM right after the k-th mutation, the moment a crash hurts
//! most (calls already in flight may still land).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use tokio::sync::Notify;

/// How large a request the proxy reads (AWS query requests are small).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// The verbs of AWS actions that change something; every other action
/// (`Describe…`, `Get…`, `List…`) is a read.
const MUTATING: &[&str] = &[
    "Create",
    "Delete",
    "Register",
    "Deregister",
    "Modify",
    "Add",
    "Remove",
    "Set",
    "Authorize",
    "Revoke",
    "Replace",
    "Attach",
    "Detach",
    "Associate",
    "Disassociate",
];

#[derive(Debug, Default)]
struct Trap {
    /// Mutations moto answered with success.
    applied: AtomicU64,
    /// 0 when disarmed.
    after: AtomicU64,
    tripped: AtomicBool,
    released: Notify,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    trap: Trap,
}

/// A running proxy; it stops when dropped.
pub(crate) struct Proxy {
    /// `http://127.0.0.1:PORT`, to put in the CCM's cloud config.
    pub(crate) endpoint: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` (moto's endpoint).
    pub(crate) async fn start(upstream: &str) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder().no_proxy().build()?,
            trap: Trap::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            // Ends only when the test drops the proxy.
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            endpoint,
            shared,
            task,
        })
    }

    /// Holds the answer to the `k`-th mutation from now on (counted from
    /// the proxy's start).
    pub(crate) fn arm(&self, k: u64) {
        self.shared.trap.after.store(k, Ordering::SeqCst);
    }

    /// How many mutations moto applied through the proxy, and whether the
    /// trap has tripped.
    pub(crate) fn trap(&self) -> (u64, bool) {
        let trap = &self.shared.trap;
        (
            trap.applied.load(Ordering::SeqCst),
            trap.tripped.load(Ordering::SeqCst),
        )
    }

    /// Disarms the trap and lets the held answer go (to a caller that is
    /// gone by then).
    pub(crate) fn release(&self) {
        let trap = &self.shared.trap;
        trap.after.store(0, Ordering::SeqCst);
        trap.released.notify_waiters();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.release();
        self.task.abort();
    }
}

/// The `Action` of an AWS query-protocol request body.
fn action(body: &[u8]) -> Option<String> {
    body.split(|b| *b == b'&')
        .find_map(|pair| pair.strip_prefix(b"Action="))
        .map(|a| String::from_utf8_lossy(a).into_owned())
}

fn is_mutation(action: &str) -> bool {
    MUTATING.iter().any(|verb| action.starts_with(verb))
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    match relay(&shared, request).await {
        Ok(response) => response,
        Err(e) => Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::from(format!("the moto proxy: {e:#}")))
            .unwrap_or_default(),
    }
}

async fn relay(shared: &Shared, request: Request) -> anyhow::Result<Response> {
    let trap = &shared.trap;
    if trap.tripped.load(Ordering::SeqCst) && trap.after.load(Ordering::SeqCst) != 0 {
        // Tripped: nothing more reaches moto until the process is killed.
        let released = trap.released.notified();
        if trap.after.load(Ordering::SeqCst) != 0 {
            released.await;
        }
        anyhow::bail!("held after the trap tripped until the caller was gone");
    }
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, MAX_BODY).await?;
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut headers = parts.headers.clone();
    headers.remove(axum::http::header::HOST);
    headers.remove(axum::http::header::CONTENT_LENGTH);
    let answer = shared
        .http
        .request(parts.method.clone(), format!("{}{path}", shared.upstream))
        .headers(headers)
        .body(body.clone())
        .send()
        .await?;
    let status = answer.status();
    let answer_headers: HeaderMap = answer.headers().clone();
    let answer_body: Bytes = answer.bytes().await?;
    if status.is_success() && action(&body).as_deref().is_some_and(is_mutation) {
        let n = trap.applied.fetch_add(1, Ordering::SeqCst) + 1;
        if trap.after.load(Ordering::SeqCst) == n {
            let released = trap.released.notified();
            trap.tripped.store(true, Ordering::SeqCst);
            released.await;
            anyhow::bail!("held after mutation {n} until the caller was gone");
        }
    }
    let mut response = Response::builder().status(status);
    for (name, value) in &answer_headers {
        if name != axum::http::header::CONTENT_LENGTH
            && name != axum::http::header::TRANSFER_ENCODING
        {
            response = response.header(name, value);
        }
    }
    Ok(response.body(Body::from(answer_body))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_read_from_the_query_body_and_sorted_into_reads_and_mutations() {
        assert_eq!(
            action(b"Action=CreateRoute&Version=2016-11-15&RouteTableId=rtb-1").as_deref(),
            Some("CreateRoute")
        );
        assert_eq!(
            action(b"Version=1&Action=DescribeTags").as_deref(),
            Some("DescribeTags")
        );
        assert_eq!(action(b"{}"), None);
        assert!(is_mutation("RegisterTargets"));
        assert!(is_mutation("AuthorizeSecurityGroupIngress"));
        assert!(!is_mutation("DescribeLoadBalancers"));
        assert!(!is_mutation("GetCallerIdentity"));
    }
}
