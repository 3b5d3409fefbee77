//! `/testapi/`: the server's own endpoints for a separate process (a
//! benchmark driver, the chart's RBAC check). They are not counted.
//!
//! - `GET /testapi/stats`: [`Stats`](crate::Stats) as JSON.
//! - `DELETE /testapi/stats`: forgets counts and the request log.
//! - `GET /testapi/requests`: `{"records": [RequestRecord...], "dropped": n}`.
//! - `POST /testapi/serviceaccounts/<namespace>/<name>/expire-tokens`: the
//!   ServiceAccount's issued tokens expire now; answers `{"expired": n}`.

use http::{Method, Response};
use hyper::body::Bytes;
use serde_json::json;

use super::render::{self, Body};
use crate::shared::Shared;
use crate::status::ApiError;

pub(crate) fn handle(shared: &Shared, method: &Method, path: &str) -> Response<Body> {
    let body = match (method.as_str(), path.trim_end_matches('/')) {
        ("GET", "stats") => serde_json::to_vec(&shared.accounting.lock().snapshot()),
        ("DELETE", "stats") => {
            shared.accounting.lock().reset();
            serde_json::to_vec(&json!({"reset": true}))
        }
        ("GET", "requests") => {
            let (records, dropped) = shared.accounting.lock().records();
            serde_json::to_vec(&json!({"records": records, "dropped": dropped}))
        }
        ("POST", other) if other.starts_with("serviceaccounts/") => {
            match other.split('/').collect::<Vec<_>>().as_slice() {
                ["serviceaccounts", namespace, name, "expire-tokens"] => {
                    let expired = shared.auth.issued.lock().expire(namespace, name);
                    serde_json::to_vec(&json!({"expired": expired}))
                }
                _ => return render::error_response(&ApiError::no_such_path()),
            }
        }
        (_, "stats" | "requests") => {
            return render::error_response(&ApiError::method_not_allowed(method.as_str(), path));
        }
        _ => return render::error_response(&ApiError::no_such_path()),
    };
    render::json_response(200, Bytes::from(body.unwrap_or_default()), &[])
}
