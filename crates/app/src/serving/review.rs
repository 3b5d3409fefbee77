//! Sending a review (TokenReview, SubjectAccessReview) through a
//! `kube::Client`, retried as upstream's webhook clients retry: transport
//! failures, 429 and 5xx answers, after 0.5 s growing 1.5 times with 20 %
//! jitter, five attempts at most, all within one time limit.

use std::fmt::Debug;
use std::time::Duration;

use kube::api::PostParams;
use kube::core::ClusterResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long a review may take, retries included (upstream's 10 s request
/// timeout).
pub(super) const TIMEOUT: Duration = Duration::from_secs(10);
const ATTEMPTS: u32 = 5;
const FIRST_DELAY: Duration = Duration::from_millis(500);

/// Why no answer came back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// The API server refused or could not be reached (after retries).
    #[error("{0}")]
    Api(#[source] kube::Error),
    /// No answer within [`TIMEOUT`].
    #[error("no answer within {TIMEOUT:?}")]
    Timeout,
}

/// Creates `review` and returns the API server's answer.
///
/// # Errors
/// [`ReviewError`]: a refusal that retrying cannot fix, the last failure
/// after five attempts, or the time limit.
pub(super) async fn create<K>(client: &kube::Client, review: &K) -> Result<K, ReviewError>
where
    K: kube::Resource<Scope = ClusterResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api = kube::Api::<K>::all(client.clone());
    let attempts = async {
        let mut delay = FIRST_DELAY;
        let mut attempt = 1;
        loop {
            match api.create(&PostParams::default(), review).await {
                Ok(answer) => return Ok(answer),
                Err(err) if attempt < ATTEMPTS && retryable(&err) => {
                    tracing::debug!(error = %err, attempt, "retrying a review");
                    tokio::time::sleep(delay.mul_f64(1.0 + 0.2 * fastrand::f64())).await;
                    delay = delay.mul_f64(1.5);
                    attempt += 1;
                }
                Err(err) => return Err(ReviewError::Api(err)),
            }
        }
    };
    tokio::time::timeout(TIMEOUT, attempts)
        .await
        .unwrap_or(Err(ReviewError::Timeout))
}

/// Failures another attempt may fix: the connection, overload, the
/// server's own errors.
fn retryable(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retried() {
        let status = |code| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..kube::core::Status::default()
            }))
        };
        assert!(retryable(&status(500)) && retryable(&status(503)) && retryable(&status(429)));
        assert!(!retryable(&status(403)) && !retryable(&status(400)));
        assert!(retryable(&kube::Error::Service(
            "connection refused".into()
        )));
    }
}
