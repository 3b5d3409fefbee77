//! [`Unexpected`]: what a REST API answered that the provider did not ask
//! for, in the words every REST provider's error shares.

use ccm_cloud_provider::CloudError;
use serde::de::DeserializeOwned;

/// An answer that is not what the request asked for: no such resource,
/// another status, a body that is not the documented JSON, a list without
/// end. Messages name the method and path, never a credential.
#[derive(Debug, thiserror::Error)]
pub enum Unexpected {
    /// The API answered 404.
    #[error("{method} {path}: not found")]
    NotFound {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
    },

    /// The API answered another non-success status.
    #[error("{method} {path}: {api} answered {status}: {detail}")]
    Status {
        /// The request method.
        method: &'static str,
        /// The request path.
        path: String,
        /// The API, as its errors name it (`DigitalOcean API`, `Rancher`).
        api: &'static str,
        /// The HTTP status.
        status: u16,
        /// The error body's code and message, or the start of the body.
        detail: String,
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

    /// A list never reached its last page.
    #[error("GET {path}: still more pages after {pages}; giving up")]
    TooManyPages {
        /// The list's path.
        path: String,
        /// Pages read.
        pages: u32,
    },
}

impl From<Unexpected> for CloudError {
    fn from(err: Unexpected) -> Self {
        let message = err.to_string();
        match err {
            Unexpected::Decode { source, .. } => CloudError::other(message, source),
            _ => CloudError::msg(message),
        }
    }
}

/// `body`, the answer to `method path`, decoded (an empty body as `null`).
///
/// # Errors
/// [`Unexpected::Decode`] when it is not the JSON `T` reads.
pub fn decode_answer<T: DeserializeOwned>(
    method: &'static str,
    path: &str,
    body: &[u8],
) -> Result<T, Unexpected> {
    crate::decode(body).map_err(|source| Unexpected::Decode {
        method,
        path: path.to_owned(),
        source,
    })
}
