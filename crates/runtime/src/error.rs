//! Why a reconcile failed, and what the framework does next.

use std::time::Duration;

use ccm_cloud_provider::CloudError;

/// A failed reconcile. Its [`ReconcileError::retry`] decides when the object
/// is tried again.
///
/// Its message holds the cause's, so it has no `source()`: a chain printer
/// (`{:#}`, `tracing`'s error fields) shows the cause once.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A cloud-provider call failed.
    #[error("cloud provider: {0}")]
    Cloud(CloudError),
    /// A Kubernetes API call failed.
    #[error("kubernetes API: {0}")]
    Kube(kube::Error),
    /// The object cannot be reconciled until it changes: bad input, already
    /// reported to the user by a Warning event.
    #[error("{0}")]
    Invalid(String),
    /// A condition outside the object is not met yet (for example no cloud
    /// address matches the kubelet's node IP): retried with backoff.
    #[error("{0}")]
    NotReady(String),
}

impl From<CloudError> for ReconcileError {
    fn from(err: CloudError) -> Self {
        Self::Cloud(err)
    }
}

impl From<kube::Error> for ReconcileError {
    fn from(err: kube::Error) -> Self {
        Self::Kube(err)
    }
}

/// When to try an object again after a failed reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Exponential backoff per object, 5 s doubling to 300 s (upstream's
    /// `ItemExponentialFailureRateLimiter`).
    Backoff,
    /// Exactly after this delay, which the cloud or API server asked for;
    /// not counted as a failure. The framework requeues after at most
    /// [`MAX_SERVER_DELAY`](ccm_cloud_provider::server_delay::MAX_SERVER_DELAY)
    /// whatever the delay says.
    After(Duration),
    /// Not until the object changes.
    AwaitChange,
}

impl ReconcileError {
    /// The retry rule for this error.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Cloud(err) => match err {
                CloudError::Throttled { .. } | CloudError::Retry { .. } => {
                    Retry::After(err.requested_delay().unwrap_or(Duration::from_secs(5)))
                }
                CloudError::InvalidInput { .. }
                | CloudError::ImplementedElsewhere
                | CloudError::NotImplemented => Retry::AwaitChange,
                _ => Retry::Backoff,
            },
            // Someone else wrote the object first: the watch brings the new
            // version; try again soon without growing the backoff.
            Self::Kube(kube::Error::Api(status)) if status.code == 409 => {
                Retry::After(Duration::from_millis(200))
            }
            Self::Kube(_) | Self::NotReady(_) => Retry::Backoff,
            Self::Invalid(_) => Retry::AwaitChange,
        }
    }

    /// A short, stable label for metrics: `throttled`, `kube`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cloud(err) => err.kind(),
            Self::Kube(_) => "kube",
            Self::Invalid(_) => "invalid",
            Self::NotReady(_) => "not_ready",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_delays_are_honoured_exactly() {
        let throttled = ReconcileError::Cloud(CloudError::Throttled {
            retry_after: Duration::from_secs(3),
        });
        assert_eq!(throttled.retry(), Retry::After(Duration::from_secs(3)));
        let retry = ReconcileError::Cloud(CloudError::Retry {
            after: Duration::from_secs(9),
            reason: "provisioning".into(),
        });
        assert_eq!(retry.retry(), Retry::After(Duration::from_secs(9)));
    }

    #[test]
    fn provider_delays_beyond_the_ceiling_are_clamped() {
        use ccm_cloud_provider::server_delay::MAX_SERVER_DELAY;
        let throttled = ReconcileError::Cloud(CloudError::Throttled {
            retry_after: Duration::MAX,
        });
        assert_eq!(throttled.retry(), Retry::After(MAX_SERVER_DELAY));
        let retry = ReconcileError::Cloud(CloudError::Retry {
            after: Duration::from_secs(3 * 365 * 24 * 3600),
            reason: "provisioning".into(),
        });
        assert_eq!(retry.retry(), Retry::After(MAX_SERVER_DELAY));
    }

    #[test]
    fn the_cause_is_printed_once() {
        use std::error::Error as _;
        let err = ReconcileError::from(CloudError::msg("boom"));
        assert_eq!(err.to_string(), "cloud provider: boom");
        assert!(
            err.source().is_none(),
            "the message already holds the cause"
        );
        let err = ReconcileError::from(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert!(err.source().is_none());
        assert!(err.to_string().starts_with("kubernetes API: "), "{err}");
    }

    #[test]
    fn bad_input_waits_for_a_change_and_failures_back_off() {
        let invalid = ReconcileError::Cloud(CloudError::invalid("annotation", "expected a number"));
        assert_eq!(invalid.retry(), Retry::AwaitChange);
        assert_eq!(
            ReconcileError::Cloud(CloudError::msg("boom")).retry(),
            Retry::Backoff
        );
        assert_eq!(
            ReconcileError::NotReady("no matching address".into()).retry(),
            Retry::Backoff
        );
    }
}
