//! `POST /validate-service`: an `admission.k8s.io/v1` AdmissionReview in,
//! the same review with its response out. A body that is not a review is
//! answered 400 and never reaches the decision.
//!
//! Anyone who reaches the port can call it, so what one call may cost is
//! bounded ([`Limits`]): bodies above kube-apiserver's own limit are refused
//! 413 as they stream in, never buffered whole; a body must arrive within
//! the read timeout (else 408); a few reviews are read and parsed at once,
//! a call that finds no free slot soon is shed with 429 and `Retry-After`;
//! and parsing runs on the blocking pool, off the runtime that renews the
//! Lease.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use ccm_cloud_provider::CloudProvider;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use k8s_openapi::api::core::v1::Service;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::decide::{Policy, decide};

/// The largest review accepted: kube-apiserver's own request body limit
/// (`MaxRequestBodyBytes`, 3 MiB), so it never sends a larger one.
pub(crate) const MAX_BODY: usize = 3 * 1024 * 1024;

/// Reviews read and parsed at once. Parsing is CPU-bound, and a 3 MiB body
/// of tiny JSON values can take some 16 times its size once parsed, so
/// four at once stay well under the chart's 256Mi while real reviews (a
/// few KiB, parsed in well under a millisecond) never wait for long.
pub(crate) const MAX_CONCURRENT_REVIEWS: usize = 4;

/// What one call may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The largest body; larger ones are refused 413.
    pub(crate) max_body: usize,
    /// Reviews read and parsed at once.
    pub(crate) concurrent: usize,
    /// How long a call waits for a slot before it is shed with 429.
    pub(crate) queue_wait: Duration,
    /// How long the body may take to arrive (kube-apiserver's default
    /// webhook timeout: it has given up by then).
    pub(crate) read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body: MAX_BODY,
            concurrent: MAX_CONCURRENT_REVIEWS,
            queue_wait: Duration::from_secs(1),
            read_timeout: Duration::from_secs(10),
        }
    }
}

/// The cloud the reviews are decided for, under which policy, and the
/// slots they take.
#[derive(Clone)]
pub(crate) struct Reviewer {
    cloud: Arc<dyn CloudProvider>,
    policy: Policy,
    slots: Arc<Semaphore>,
    limits: Limits,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("policy", &self.policy)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Reviewer {
    /// The default [`Limits`].
    pub(crate) fn new(cloud: Arc<dyn CloudProvider>, policy: Policy) -> Self {
        Self::with_limits(cloud, policy, Limits::default())
    }

    pub(crate) fn with_limits(
        cloud: Arc<dyn CloudProvider>,
        policy: Policy,
        limits: Limits,
    ) -> Self {
        Self {
            cloud,
            policy,
            slots: Arc::new(Semaphore::new(limits.concurrent.max(1))),
            limits,
        }
    }

    async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        let slots = self.slots.clone();
        match tokio::time::timeout(self.limits.queue_wait, slots.acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            _ => None,
        }
    }
}

/// Answers one review over HTTP.
pub(crate) async fn validate(State(reviewer): State<Reviewer>, request: Request) -> Response {
    let max_body = reviewer.limits.max_body;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max_body as u64) {
        return too_large(max_body);
    }
    let Some(slot) = reviewer.slot().await else {
        tracing::debug!("admission review shed: every slot is busy");
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "too many admission reviews at once; retry in a second",
        )
            .into_response();
    };
    let body = Limited::new(request.into_body(), max_body).collect();
    let body: Bytes = match tokio::time::timeout(reviewer.limits.read_timeout, body).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(err)) if err.downcast_ref::<LengthLimitError>().is_some() => {
            return too_large(max_body);
        }
        Ok(Err(_)) => {
            return (
                StatusCode::BAD_REQUEST,
                "the review's body could not be read",
            )
                .into_response();
        }
        Err(_) => {
            return (
                StatusCode::REQUEST_TIMEOUT,
                "the review's body did not arrive in time",
            )
                .into_response();
        }
    };
    let cloud = reviewer.cloud.clone();
    let policy = reviewer.policy;
    // The slot goes with the parse: a caller that hangs up does not free
    // it before the parse ends.
    let answered = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        respond(cloud.as_ref(), &body, policy).map(|review| serde_json::to_vec(&review))
    })
    .await;
    match answered {
        Ok(Ok(Ok(json))) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Ok(Err(why)) => (StatusCode::BAD_REQUEST, why).into_response(),
        Ok(Ok(Err(_))) | Err(_) => {
            tracing::error!("an admission review could not be answered");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the review could not be answered",
            )
                .into_response()
        }
    }
}

fn too_large(max_body: usize) -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("an admission review may have at most {max_body} bytes"),
    )
        .into_response()
}

/// The review to send back for `body` under `policy`, or why it is not a
/// review.
///
/// # Errors
/// The body is not JSON of an AdmissionReview with a request; the message
/// gives the position, never the content.
pub(crate) fn respond(
    cloud: &dyn CloudProvider,
    body: &[u8],
    policy: Policy,
) -> Result<AdmissionReview<DynamicObject>, String> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not an AdmissionReview: malformed at line {} column {}",
            e.line(),
            e.column()
        )
    })?;
    let request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .map_err(|_| "not an AdmissionReview: it has no request".to_owned())?;
    Ok(answer(cloud, &request, policy).into_review())
}

/// The response to one request: anything but a core/v1 Service is admitted.
fn answer(
    cloud: &dyn CloudProvider,
    request: &AdmissionRequest<DynamicObject>,
    policy: Policy,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    if !request.kind.group.is_empty() || request.kind.kind != "Service" {
        return response;
    }
    let Some(service) = request.object.as_ref().and_then(as_service) else {
        return response;
    };
    let old = request.old_object.as_ref().and_then(as_service);
    let verdict = decide(cloud.load_balancer(), old.as_ref(), &service, policy);
    if !verdict.warnings.is_empty() {
        response.warnings = Some(verdict.warnings);
    }
    match verdict.refusal {
        Some(why) => {
            let mut denied = response.deny(why);
            denied.result.code = 422;
            denied.result.reason = "Invalid".to_owned();
            denied
        }
        None => response,
    }
}

/// The object as a Service; `None` when it is not one.
fn as_service(object: &DynamicObject) -> Option<Service> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .ok()
}
