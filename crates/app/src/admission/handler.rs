//! `POST /validate-service`: an `admission.k8s.io/v1` AdmissionReview in,
//! the same review with its response out. A body that is not a review is
//! answered 400 and never reaches the decision.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cloud_provider::CloudProvider;
use k8s_openapi::api::core::v1::Service;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

use super::decide::decide;

/// The largest review accepted: a Service and its old version, each under
/// etcd's 1.5 MiB object limit, with room to spare.
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// Answers one review over HTTP.
pub(crate) async fn validate(State(cloud): State<Arc<dyn CloudProvider>>, body: Bytes) -> Response {
    match respond(cloud.as_ref(), &body) {
        Ok(review) => Json(review).into_response(),
        Err(why) => (StatusCode::BAD_REQUEST, why).into_response(),
    }
}

/// The review to send back for `body`, or why it is not a review.
///
/// # Errors
/// The body is not JSON of an AdmissionReview with a request; the message
/// gives the position, never the content.
pub(crate) fn respond(
    cloud: &dyn CloudProvider,
    body: &[u8],
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
    Ok(answer(cloud, &request).into_review())
}

/// The response to one request: anything but a core/v1 Service is admitted.
fn answer(
    cloud: &dyn CloudProvider,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    if !request.kind.group.is_empty() || request.kind.kind != "Service" {
        return response;
    }
    let Some(service) = request.object.as_ref().and_then(as_service) else {
        return response;
    };
    let old = request.old_object.as_ref().and_then(as_service);
    let verdict = decide(cloud.load_balancer(), old.as_ref(), &service);
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
