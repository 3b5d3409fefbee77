//! [`ApiError`]: a DigitalOcean API call that did not succeed, as the
//! provider maps it to a cloud error.

use std::time::Duration;

use ccm_cloud_provider::CloudError;

use super::types::ErrorBody;

/// What DigitalOcean's refusals of a load balancer over the account's
/// limit say, in any case: "You have reached your load balancer limit,
/// maximum allowed 2. Please contact support to raise your load balancer
/// limit." (answered 429). The published spec documents no such error.
const LOAD_BALANCER_LIMIT: &str = "load balancer limit";

/// A DigitalOcean API call that did not succeed.
///
/// Messages name the method and path, never the token: it only travels in
/// the `Authorization` header, which no error carries.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// The API answered 429, or an earlier answer said the budget is spent
    /// (`RateLimit-Remaining: 0`) and its reset time has not come.
    #[error("DigitalOcean API rate limit reached; retry after {retry_after:?}")]
    Throttled {
        /// Until the server's `RateLimit-Reset`.
        retry_after: Duration,
    },

    /// The request got no answer: the fence refused it, the wire failed,
    /// or its body was not JSON (`ccm_rest`).
    #[error(transparent)]
    Send(#[from] ccm_rest::SendError),

    /// The account's load balancer limit is reached. DigitalOcean answers
    /// it 429 like a rate limit, but waiting for the rate-limit reset does
    /// not lift it.
    #[error("{method} {path}: {message}")]
    QuotaExceeded {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// The API's message.
        message: String,
    },

    /// A path that cannot be joined onto the base URL.
    #[error("`{path}` is not a valid API path")]
    InvalidPath {
        /// The path.
        path: String,
    },

    /// An answer every REST API can give: not found, another status, a
    /// body that is not JSON, a list without end.
    #[error(transparent)]
    Unexpected(#[from] ccm_rest::Unexpected),
}

impl ApiError {
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(
            self,
            Self::Unexpected(ccm_rest::Unexpected::NotFound { .. })
        )
    }
}

impl From<ApiError> for CloudError {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Throttled { retry_after } => CloudError::Throttled { retry_after },
            ApiError::Send(err) => err.into(),
            ApiError::QuotaExceeded { message, .. } => CloudError::QuotaExceeded { message },
            ApiError::Unexpected(err) => err.into(),
            ApiError::InvalidPath { .. } => CloudError::msg(err.to_string()),
        }
    }
}

/// The API's message when an answer with `status` and `body` refuses for
/// the account's load balancer limit: a 403, 422 or 429 whose message names
/// that limit. Any other refusal, a rate limit's 429 included, is `None`.
pub(super) fn quota_refusal(status: u16, body: &[u8]) -> Option<String> {
    if !matches!(status, 403 | 422 | 429) {
        return None;
    }
    let error: ErrorBody = serde_json::from_slice(body).ok()?;
    error
        .message
        .to_lowercase()
        .contains(LOAD_BALANCER_LIMIT)
        .then_some(error.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: &str = "You have reached your load balancer limit, maximum allowed 2. \
        Please contact support to raise your load balancer limit.";

    fn body(id: &str, message: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "id": id, "message": message })).unwrap()
    }

    #[test]
    fn only_a_refusal_naming_the_load_balancer_limit_is_a_quota_refusal() {
        for status in [429, 422, 403] {
            assert_eq!(
                quota_refusal(status, &body("too_many_requests", LIMIT)).as_deref(),
                Some(LIMIT),
                "{status}"
            );
        }
        for (status, body) in [
            (429, body("too_many_requests", "API rate limit exceeded.")),
            (
                422,
                body(
                    "unprocessable_entity",
                    "creating this/these droplet(s) will exceed your droplet limit",
                ),
            ),
            (500, body("server_error", LIMIT)),
            (429, LIMIT.as_bytes().to_vec()),
        ] {
            assert_eq!(quota_refusal(status, &body), None, "{status}");
        }
    }

    #[test]
    fn a_quota_refusal_is_quota_exceeded_with_the_apis_words() {
        let err = ApiError::QuotaExceeded {
            method: "POST",
            path: "/v2/load_balancers".into(),
            message: LIMIT.into(),
        };
        assert!(err.to_string().starts_with("POST /v2/load_balancers: "));
        assert!(matches!(
            CloudError::from(err),
            CloudError::QuotaExceeded { message } if message == LIMIT
        ));
    }
}
