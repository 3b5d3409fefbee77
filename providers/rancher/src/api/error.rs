//! [`ApiError`]: a Cattle API call that did not succeed, and how the
//! provider turns it into a cloud error.

use std::time::Duration;

use ccm_cloud_provider::CloudError;

/// A Cattle API call that did not succeed.
///
/// Messages name the method and the path, never the secret key: it only
/// travels in the `Authorization` header, which no error carries.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// The API answered 401 or 403: the key is wrong or lacks the rights.
    #[error(
        "{method} {path}: Rancher refused the API key ({status}): check CATTLE_ACCESS_KEY and CATTLE_SECRET_KEY, and that the key belongs to this environment"
    )]
    Unauthorized {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// 401 or 403.
        status: u16,
    },

    /// The API answered 429, or 503 with a `Retry-After`.
    #[error("{method} {path}: Rancher asked to retry after {retry_after:?}")]
    Throttled {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// What `Retry-After` said (one second without it).
        retry_after: Duration,
    },

    /// The request got no answer: the fence refused it or the wire
    /// failed (`ccm_rest`).
    #[error(transparent)]
    Send(#[from] ccm_rest::SendError),

    /// The API answered 409: the resource is in a state that does not
    /// allow the request yet (a transition is running).
    #[error("{method} {path}: Rancher answered 409 Conflict: {detail}")]
    Conflict {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// The error body's code and message.
        detail: String,
    },

    /// A link or action URL the server gave points away from `CATTLE_URL`'s
    /// server: it is not followed, so the key is never sent elsewhere.
    #[error("the Rancher API gave a URL on another server ({url}); not followed")]
    ForeignUrl {
        /// The URL, without its query.
        url: String,
    },

    /// A resource lacks a link or an action the provider needs.
    #[error("{what} has no `{name}` {kind}")]
    Missing {
        /// The resource.
        what: String,
        /// `link` or `action`.
        kind: &'static str,
        /// The link's or action's name.
        name: String,
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
            ApiError::Throttled { retry_after, .. } => CloudError::Throttled { retry_after },
            ApiError::Send(err) => err.into(),
            ApiError::Conflict { .. } => CloudError::Retry {
                after: Duration::from_secs(1),
                reason: err.to_string(),
            },
            ApiError::Unexpected(err) => err.into(),
            other => CloudError::msg(other.to_string()),
        }
    }
}
