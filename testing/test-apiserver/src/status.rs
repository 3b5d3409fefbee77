//! Failures as the Kubernetes API reports them: an HTTP code and a
//! `meta/v1 Status` body whose `reason` clients branch on.

use std::time::Duration;

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// A request answered with a `Status` instead of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    /// Boxed: a `Value` is large and every handler returns `Result<_, ApiError>`.
    pub(crate) details: Option<Box<Value>>,
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// `nodes "x" not found` (404 NotFound).
    pub(crate) fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified_plural()),
        )
        .with_details(object_details(rt, name))
    }

    /// The URL names no resource this server serves (404 NotFound).
    pub(crate) fn no_such_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `nodes "x" already exists` (409 AlreadyExists).
    pub(crate) fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified_plural()),
        )
        .with_details(object_details(rt, name))
    }

    /// A write lost an optimistic-concurrency race (409 Conflict).
    pub(crate) fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                rt.qualified_plural()
            ),
        )
        .with_details(object_details(rt, name))
    }

    /// The stale-resourceVersion conflict clients retry on.
    pub(crate) fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 400 BadRequest.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 Invalid with one cause per field: `Kind "name" is invalid: field: message`.
    pub(crate) fn invalid(
        kind: &str,
        group: &str,
        name: &str,
        causes: &[(String, String)],
    ) -> Self {
        let listed: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        // kube-apiserver names a kind outside the core group with its group.
        let shown = if group.is_empty() || kind.contains('.') {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let message = match listed.as_slice() {
            [one] => format!("{shown} \"{name}\" is invalid: {one}"),
            many => format!("{shown} \"{name}\" is invalid: [{}]", many.join(", ")),
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|(field, message)| json!({"reason": cause_reason(message), "message": message, "field": field}))
            .collect();
        Self::new(422, "Invalid", message)
            .with_details(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
    }

    /// 415 UnsupportedMediaType: a body format or patch type not served.
    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 406 NotAcceptable: no response format the client accepts.
    pub(crate) fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 405 MethodNotAllowed.
    pub(crate) fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource: {method} {what}"
            ),
        )
    }

    /// 501: a Kubernetes semantic this server deliberately does not implement.
    pub(crate) fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(
            501,
            "NotImplemented",
            format!("not implemented by test-apiserver: {}", message.into()),
        )
    }

    /// 403 Forbidden.
    pub(crate) fn forbidden(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{} \"{name}\" is forbidden: {why}", rt.qualified_plural()),
        )
        .with_details(object_details(rt, name))
    }

    /// 410 Expired: a resourceVersion or continue token older than the history kept.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 504 Timeout for a resourceVersion newer than any this server issued.
    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1
        }))
    }

    /// 500 InternalError.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// An injected failure: the code's usual reason, and Retry-After for 429.
    pub(crate) fn injected(code: u16, retry_after: Option<Duration>) -> Self {
        let reason = reason_for_code(code);
        let mut err = Self::new(
            code,
            reason,
            format!("injected by test-apiserver: {reason} ({code})"),
        );
        if let Some(after) = retry_after {
            let secs = after.as_secs().max(1);
            err.retry_after = Some(secs);
            err.details = Some(Box::new(json!({"retryAfterSeconds": secs})));
        }
        err
    }

    /// The `Status` object, as JSON.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = (**details).clone();
        }
        status
    }
}

/// The reason Kubernetes gives a status code.
pub(crate) fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

/// `details` naming one object: Kubernetes puts the plural resource in `kind`.
fn object_details(rt: &ResourceType, name: &str) -> Value {
    json!({"name": name, "group": rt.group, "kind": rt.plural})
}

/// The `reason` of a 422 cause, from how its message starts (Kubernetes'
/// `field.Error` types print these prefixes).
fn cause_reason(message: &str) -> &'static str {
    [
        ("Unsupported value", "FieldValueNotSupported"),
        ("Required value", "FieldValueRequired"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
    ]
    .iter()
    .find(|(prefix, _)| message.starts_with(prefix))
    .map_or("FieldValueInvalid", |(_, reason)| reason)
}
