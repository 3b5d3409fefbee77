//! [`ApiError`]: a DigitalOcean API call that did not succeed, as the
//! provider maps it to a cloud error.

use std::time::Duration;

use cloud_provider::CloudError;

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

    /// The framework's request fence refused: this process may no longer
    /// change the cloud (see [`cloud_provider::fence`]). Nothing was sent.
    #[error("{method} {path} not sent: {source}")]
    Fenced {
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// The fence's refusal, a retry.
        source: CloudError,
    },

    /// The API answered 404.
    #[error("{method} {path}: not found")]
    NotFound {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
    },

    /// The API answered another non-success status.
    #[error("{method} {path}: DigitalOcean API answered {status}: {detail}")]
    Status {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The error body's `id` and `message`, or the start of the body.
        detail: String,
    },

    /// The request could not be sent or its answer not read.
    #[error("{method} {path}: request to the DigitalOcean API failed")]
    Transport {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// What went wrong on the wire.
        #[source]
        source: reqwest::Error,
    },

    /// The answer was not the JSON the API documents.
    #[error("{method} {path}: unexpected response body")]
    Decode {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// The decoding failure.
        #[source]
        source: serde_json::Error,
    },

    /// The request's body could not be encoded as JSON.
    #[error("{method} {path}: encoding the request body")]
    Encode {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// The encoding failure.
        #[source]
        source: serde_json::Error,
    },

    /// A path that cannot be joined onto the base URL.
    #[error("`{path}` is not a valid API path")]
    InvalidPath {
        /// The path.
        path: String,
    },

    /// A list never reached its last page.
    #[error("GET {path}: still more pages after {pages}; giving up")]
    TooManyPages {
        /// The list's path.
        path: String,
        /// Pages read.
        pages: u32,
    },
}

impl ApiError {
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

impl From<ApiError> for CloudError {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Throttled { retry_after } => CloudError::Throttled { retry_after },
            ApiError::Fenced { source, .. } => source,
            other => {
                let message = other.to_string();
                match other {
                    ApiError::Transport { source, .. } => CloudError::other(message, source),
                    ApiError::Decode { source, .. } | ApiError::Encode { source, .. } => {
                        CloudError::other(message, source)
                    }
                    _ => CloudError::msg(message),
                }
            }
        }
    }
}
