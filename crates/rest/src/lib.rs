//! The one HTTP client that REST providers (DigitalOcean, Rancher, and what
//! `cargo xtask new-provider` generates) send their requests through.
//!
//! [`Rest::send`] does what every such request needs and nothing a cloud
//! decides: the credentials (a bearer token or a basic-auth key, marked
//! sensitive so no debug output shows them), the framework's request fence
//! asked as late as possible with the request described (`GET /v2/droplets`
//! with its query, or a mutation with the start of its body, the secret
//! redacted) so that a dry run sends the reads and plans the rest, the body
//! carried fenced (asked again when the connection writes it), one
//! connection pool with bounded timeouts. It answers the status, headers and
//! body; what a status means (throttled, over a quota) is the provider's to
//! say, with [`decode`], [`retry_after`] and [`excerpt`] to help, and
//! [`Unexpected`] for what every REST API answers alike.

mod send;
mod unexpected;

use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::server_delay;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
pub use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
pub use unexpected::{Unexpected, decode_answer};

/// How long a request may take, answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a body goes into one line: an error's message, a request's
/// description to the fence.
pub const MAX_DETAIL: usize = 300;

/// How requests prove who sends them.
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// HTTP basic authentication: a key's public and secret parts.
    Basic {
        /// The public part (the user name).
        user: String,
        /// The secret part (the password).
        secret: String,
    },
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Self::Basic { user, .. } => write!(f, "Basic({user}:<redacted>)"),
        }
    }
}

/// A client for one cloud's API: one connection pool and one set of
/// credentials for every call the provider makes.
pub struct Rest {
    http: reqwest::Client,
    /// The `Authorization` header, sensitive.
    authorization: HeaderValue,
    /// The secret, to take out of any text the server sends back.
    secret: String,
    /// The cloud's name as people write it, for messages and log lines
    /// (`DigitalOcean`).
    cloud: &'static str,
}

impl fmt::Debug for Rest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rest")
            .field("cloud", &self.cloud)
            .finish_non_exhaustive()
    }
}

/// The client could not be set up (no network I/O happens then).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The credentials have characters an HTTP header cannot carry.
    #[error("the credentials contain characters not allowed in an HTTP header")]
    NotAHeader,
    /// The HTTP client could not be built (TLS setup).
    #[error("could not set up the HTTPS client")]
    Http(#[source] reqwest::Error),
}

/// A request that got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The framework's request fence refused: this process may no longer
    /// change the cloud (see [`ccm_cloud_provider::fence`]). Nothing was
    /// sent.
    #[error("{method} {path} not sent: {source}")]
    Fenced {
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// The fence's refusal, a retry.
        source: CloudError,
    },
    /// The request could not be sent or its answer not read.
    #[error("{method} {path}: request to the {cloud} API failed")]
    Transport {
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// The cloud's name.
        cloud: &'static str,
        /// What went wrong on the wire.
        #[source]
        source: reqwest::Error,
    },
    /// The request's body could not be encoded as JSON.
    #[error("{method} {path}: encoding the request body")]
    Encode {
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// The encoding failure.
        #[source]
        source: serde_json::Error,
    },
}

impl From<SendError> for CloudError {
    fn from(err: SendError) -> Self {
        let message = err.to_string();
        match err {
            SendError::Fenced { source, .. } => source,
            SendError::Transport { source, .. } => CloudError::other(message, source),
            SendError::Encode { source, .. } => CloudError::other(message, source),
        }
    }
}

/// What the server answered.
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, whole.
    pub body: bytes::Bytes,
}

impl Rest {
    /// A client for `cloud` (its name as people write it: `DigitalOcean`)
    /// sending `auth`.
    ///
    /// # Errors
    /// When the credentials cannot be a header, or TLS cannot be set up.
    pub fn new(cloud: &'static str, auth: Auth) -> Result<Self, BuildError> {
        let (authorization, secret) = match auth {
            Auth::Bearer(token) => (format!("Bearer {token}"), token),
            Auth::Basic { user, secret } => {
                let pair = format!("{user}:{secret}");
                (format!("Basic {}", STANDARD.encode(pair)), secret)
            }
        };
        let mut authorization =
            HeaderValue::from_str(&authorization).map_err(|_| BuildError::NotAHeader)?;
        // Keeps the value out of hyper's and reqwest's debug output.
        authorization.set_sensitive(true);
        let http = reqwest::Client::builder()
            .user_agent(format!(
                "rust-cloud-controller-manager/{} ({})",
                env!("CARGO_PKG_VERSION"),
                cloud.to_lowercase()
            ))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(BuildError::Http)?;
        Ok(Self {
            http,
            authorization,
            secret,
            cloud,
        })
    }

    /// `text` (something the server sent back) without the secret, should
    /// the server echo it.
    pub fn redact(&self, text: &str) -> String {
        if self.secret.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.secret, "<redacted>")
        }
    }
}

/// A success's body as `T`; an empty body (a 204) decodes from `null`.
///
/// # Errors
/// When the body is not the JSON `T` is.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, serde_json::Error> {
    let body = if body.is_empty() {
        b"null".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body)
}

/// The start of `text`, trimmed, at most [`MAX_DETAIL`] characters (`…`
/// marks a cut): one line of an error message.
pub fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_DETAIL) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `Retry-After`, seconds or an HTTP-date: at least a second, at most
/// [`server_delay::MAX_SERVER_DELAY`].
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| server_delay::parse_retry_after(v, now))
        .map(|wait| wait.max(Duration::from_secs(1)))
}

/// A method's name, for messages and the fence.
pub fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "PATCH",
    }
}

/// The path of `url` and its query, if any: `/v2/droplets?page=1`.
pub fn path_and_query(url: &Url) -> String {
    match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    }
}

#[cfg(test)]
mod tests;
