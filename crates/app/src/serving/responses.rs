//! The refusals, worded and encoded as k8s.io/apiserver's
//! `responsewriters`: a `Status` object for 401 and 403, plain text for 500.

use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::authz::Attributes;

/// 401 with upstream's `Status` body.
pub(super) fn unauthorized() -> Response {
    status(
        StatusCode::UNAUTHORIZED,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }),
    )
}

/// 403 with upstream's non-resource message:
/// `forbidden: User "X" cannot get path "/metrics"`, the authorizer's
/// reason appended after `: ` when there is one.
pub(super) fn forbidden(attributes: &Attributes, reason: &str) -> Response {
    status(
        StatusCode::FORBIDDEN,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": forbidden_message(attributes, reason),
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        }),
    )
}

pub(super) fn forbidden_message(attributes: &Attributes, reason: &str) -> String {
    let message = sanitize(&format!(
        "User {:?} cannot {} path {:?}",
        attributes.user.name, attributes.verb, attributes.path
    ));
    if reason.is_empty() {
        format!("forbidden: {message}")
    } else {
        format!("forbidden: {message}: {reason}")
    }
}

/// 500 as Go's `http.Error`: plain text.
pub(super) fn internal_error(uri: &Uri, error: &str) -> Response {
    let body = sanitize(&format!(
        "Internal Server Error: {:?}: {error}\n",
        uri.to_string()
    ));
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

fn status(code: StatusCode, body: &serde_json::Value) -> Response {
    let mut response = (code, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Upstream escapes `&`, `<` and `>` in these messages.
fn sanitize(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
