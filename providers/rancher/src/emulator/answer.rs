//! What a handler answers: a status and body, or a [`Failure`] in Cattle's
//! error envelope.

use axum::Json;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::cattle::ApiError;

/// An error answer, in Cattle's envelope.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
    /// `Retry-After` seconds, for a throttled answer.
    pub(super) retry_after: Option<u64>,
}

impl Failure {
    /// An error with `status` and Cattle `code`.
    pub(super) fn new(status: StatusCode, code: &'static str, message: String) -> Self {
        Self {
            status,
            code,
            message,
            retry_after: None,
        }
    }

    /// `422` with `code`, for a request Cattle's validation refuses.
    pub(super) fn unprocessable(code: &'static str, message: String) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// `404 NotFound`.
    pub(super) fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("Not found: {what}"),
        )
    }

    /// `405 MethodNotAllowed`.
    pub(super) fn method_not_allowed(method: &Method, path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("{method} is not allowed on {path}"),
        )
    }

    /// `409 InvalidState`: the action or change is not valid in the
    /// object's current state.
    pub(super) fn invalid_state(id: &str, state: &str, what: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "InvalidState",
            format!("{what} is not valid for {id} in state {state}"),
        )
    }

    /// `500 ServerError`: the emulator itself went wrong.
    pub(super) fn server(message: String) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "ServerError", message)
    }

    /// `401 Unauthorized`.
    pub(super) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized".to_owned(),
        )
    }

    /// The answer in Cattle's error envelope, with `Retry-After` when
    /// throttled and the basic-auth challenge when unauthorized.
    pub(super) fn into_response(self) -> Response {
        let body = ApiError {
            type_: "error".to_owned(),
            status: self.status.as_u16(),
            code: self.code.to_owned(),
            message: self.message,
        };
        let mut response = (self.status, Json(body)).into_response();
        let headers = response.headers_mut();
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(
                    "Basic realm=\"Enter API access key and secret key as username and password\"",
                ),
            );
        }
        response
    }
}

/// A successful answer's status and body, or the error to answer.
pub(super) type Answer = Result<(StatusCode, Value), Failure>;
