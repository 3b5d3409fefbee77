//! [`CloudError`]: what a provider answers when a call fails, each variant
//! named for what the controllers do about it.

use std::sync::Arc;
use std::time::Duration;

use crate::server_delay::clamp_delay;

/// A boxed error, accepted as the cause of a [`CloudError::Other`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a provider returns when a call does not succeed.
///
/// Each variant says what the controllers do with it, so a provider picks the
/// variant by the reaction it wants, not by the cloud's own error name.
///
/// It is `Clone` (causes are shared) because one failed batch call is the
/// answer for every node in the batch.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CloudError {
    /// The instance behind a node does not exist in the cloud.
    ///
    /// Node initialization keeps the uninitialized taint, emits a Warning
    /// event and retries with backoff. It is only meaningful from instance
    /// methods; existence checks answer `Ok(false)` instead.
    #[error("instance not found")]
    InstanceNotFound,

    /// The provider does not implement this operation.
    ///
    /// The controller logs it once and stops calling the operation; it is
    /// not retried.
    #[error("not implemented by this cloud provider")]
    NotImplemented,

    /// Another controller owns this object (upstream's
    /// `cloudprovider.ImplementedElsewhere`).
    ///
    /// The service controller leaves the Service entirely alone: no
    /// finalizer, no status, no event.
    #[error("implemented by another controller")]
    ImplementedElsewhere,

    /// The cloud refused the call because of its rate limit.
    ///
    /// The controller requeues the object after `retry_after` (at most
    /// [`MAX_SERVER_DELAY`](crate::server_delay::MAX_SERVER_DELAY)) without counting it as a failure, and emits no
    /// Warning event.
    #[error("throttled by the cloud API; retry after {retry_after:?}")]
    Throttled {
        /// How long the cloud asked callers to wait.
        retry_after: Duration,
    },

    /// The operation is progressing and should be checked again later
    /// (upstream's `api.RetryError`), for example a load balancer that is
    /// still being provisioned.
    ///
    /// The controller requeues after `after` (at most [`MAX_SERVER_DELAY`](crate::server_delay::MAX_SERVER_DELAY))
    /// and emits no Warning event.
    #[error("retry after {after:?}: {reason}")]
    Retry {
        /// When to try again.
        after: Duration,
        /// Why, for logs.
        reason: String,
    },

    /// The Kubernetes object asks for something invalid: a malformed
    /// annotation value, an unsupported combination of fields.
    ///
    /// The controller emits a Warning event naming `field` and `message`,
    /// changes nothing in the cloud, and does not retry until the object
    /// changes. The provider must return it before mutating anything.
    ///
    /// From `CloudProvider::initialize` it means the configuration is
    /// incomplete or invalid (`field` names the config key to set): the
    /// process exits 64 with one line, as for a bad flag.
    #[error("invalid {field}: {message}")]
    InvalidInput {
        /// The annotation key or field path at fault.
        field: String,
        /// What is wrong and the expected form.
        message: String,
    },

    /// The cloud refused to create something because the account's quota
    /// or limit is reached (AWS `TooManyLoadBalancers`, DigitalOcean's load
    /// balancer limit). Handled as [`CloudError::Other`]: a Warning event
    /// and retried with backoff; the service controller says `QuotaExceeded`
    /// in the Service's `LoadBalancerProvisioned` condition.
    #[error("{message}")]
    QuotaExceeded {
        /// The cloud's words, for an operator. Never includes secrets.
        message: String,
    },

    /// Any other failure. Retried with exponential backoff (5 s to 300 s)
    /// and reported as a Warning event.
    #[error("{message}")]
    Other {
        /// What failed, in words for an operator. Never includes secrets.
        message: String,
        /// The underlying cause.
        #[source]
        source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl CloudError {
    /// A general error with a message and no underlying cause.
    pub fn msg(message: impl Into<String>) -> Self {
        Self::Other {
            message: message.into(),
            source: None,
        }
    }

    /// A general error that keeps its cause.
    pub fn other(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Other {
            message: message.into(),
            source: Some(Arc::from(source.into())),
        }
    }

    /// An [`CloudError::InvalidInput`] for `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidInput {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A short, stable label for metrics and logs: `not_found`,
    /// `throttled`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InstanceNotFound => "not_found",
            Self::NotImplemented => "not_implemented",
            Self::ImplementedElsewhere => "implemented_elsewhere",
            Self::Throttled { .. } => "throttled",
            Self::Retry { .. } => "retry",
            Self::InvalidInput { .. } => "invalid_input",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::Other { .. } => "error",
        }
    }

    /// The delay the provider asked for, if it asked for one, at most
    /// [`MAX_SERVER_DELAY`](crate::server_delay::MAX_SERVER_DELAY): the delay may come from a server, and no
    /// server parks an object for longer.
    pub fn requested_delay(&self) -> Option<Duration> {
        match self {
            Self::Throttled { retry_after } => Some(clamp_delay(*retry_after)),
            Self::Retry { after, .. } => Some(clamp_delay(*after)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_delay::MAX_SERVER_DELAY;

    #[test]
    fn requested_delays_are_clamped_to_the_ceiling() {
        let throttled = CloudError::Throttled {
            retry_after: Duration::MAX,
        };
        assert_eq!(throttled.requested_delay(), Some(MAX_SERVER_DELAY));
        let retry = CloudError::Retry {
            after: Duration::from_secs(10 * 365 * 24 * 3600),
            reason: "provisioning".into(),
        };
        assert_eq!(retry.requested_delay(), Some(MAX_SERVER_DELAY));
        let short = CloudError::Retry {
            after: Duration::from_secs(3),
            reason: "provisioning".into(),
        };
        assert_eq!(short.requested_delay(), Some(Duration::from_secs(3)));
        assert_eq!(CloudError::msg("boom").requested_delay(), None);
    }
}
