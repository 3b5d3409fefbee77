//! The HTTP side: one axum fallback handler that counts and logs every
//! request, checks basic auth, injects faults, settles due transitions and
//! hands the request to the router.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::answer::{Answer, Failure};
use super::faults::{self, Faults};
use super::filters::Query;
use super::routes::{self, Request};
use super::state::Store;
use super::{ACCESS_KEY, Call, SECRET_KEY};

/// What the handler and the test-side handle share.
#[derive(Debug)]
pub(super) struct Shared {
    /// The project's path, `/v2-beta/projects/1a5`.
    pub(super) base_path: String,
    pub(super) store: Mutex<Store>,
    pub(super) faults: Mutex<Faults>,
    pub(super) requests: AtomicU64,
    pub(super) calls: Mutex<Vec<Call>>,
}

/// Serves `shared` on `listener` until the task is aborted.
pub(super) async fn serve(shared: Arc<Shared>, listener: tokio::net::TcpListener) {
    let app = axum::Router::new().fallback(handle).with_state(shared);
    if let Err(error) = axum::serve(listener, app).await {
        tracing::warn!(%error, "Cattle emulator stopped serving");
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    let raw_query = uri.query().unwrap_or_default();
    let action = Query::parse(raw_query).get("action").map(str::to_owned);
    let relative = uri
        .path()
        .strip_prefix(shared.base_path.as_str())
        .filter(|rest| rest.is_empty() || rest.starts_with('/'));
    let call_path = relative.unwrap_or(uri.path()).to_owned();
    let answer = answer(&shared, &method, relative, raw_query, &headers, &body).await;
    let response = match answer {
        Ok((status, value)) => (status, Json(value)).into_response(),
        Err(failure) => failure.into_response(),
    };
    shared.calls.lock().push(Call {
        method: method.to_string(),
        path: call_path,
        action,
        query: raw_query.to_owned(),
        status: response.status().as_u16(),
    });
    response
}

async fn answer(
    shared: &Shared,
    method: &Method,
    relative: Option<&str>,
    raw_query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Answer {
    if !authorized(headers) {
        return Err(Failure::unauthorized());
    }
    let faults = shared.faults.lock().clone();
    let mutating = !matches!(*method, Method::GET | Method::HEAD);
    if let Some(failure) = faults::inject(&faults, mutating).await {
        return Err(failure);
    }
    let Some(relative) = relative else {
        return Err(Failure::not_found("this server serves only project 1a5"));
    };
    let query = Query::parse(raw_query);
    let now = Instant::now();
    let mut store = shared.store.lock();
    store.settle(now);
    routes::route(
        &mut store,
        &Request {
            method,
            path: relative,
            query: &query,
            body,
            now,
        },
    )
}

/// Whether the request carries the emulator's key pair as basic auth.
fn authorized(headers: &HeaderMap) -> bool {
    let expected = base64(format!("{ACCESS_KEY}:{SECRET_KEY}").as_bytes());
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .is_some_and(|(scheme, credentials)| {
            scheme.eq_ignore_ascii_case("basic") && credentials.trim() == expected
        })
}

/// Standard base64 with padding (RFC 4648 §4), to compare credentials.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
