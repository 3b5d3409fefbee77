//! Injected faults: rate limiting, slow answers, server errors and
//! conflicts, decided per request once it has authenticated.

use std::time::Duration;

use axum::http::StatusCode;

use super::answer::Failure;

/// How the emulator misbehaves, for testing a client's retries. The
/// default is none at all.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The fraction (0.0 to 1.0) of requests answered `503` with a
    /// `ServerError` body.
    pub server_error_rate: f64,
    /// The fraction (0.0 to 1.0) of mutating requests (anything but `GET`)
    /// answered `409` with a `Conflict` body.
    pub conflict_rate: f64,
    /// How much later every answer comes, faulted or not (a throttled
    /// answer comes at once).
    pub delay: Duration,
    /// Whether every request is answered `429` with `Retry-After: 1`.
    pub throttled: bool,
}

/// The seconds a throttled answer's `Retry-After` asks a client to wait.
pub(super) const RETRY_AFTER_SECS: u64 = 1;

/// Applies `faults` to one request: refuses it as throttled, waits out the
/// delay, then perhaps refuses it with a server error or (if `mutating`) a
/// conflict. `None` lets it through, changing nothing.
pub(super) async fn inject(faults: &Faults, mutating: bool) -> Option<Failure> {
    if faults.throttled {
        let mut failure = Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            "Too many requests: slow down".to_owned(),
        );
        failure.retry_after = Some(RETRY_AFTER_SECS);
        return Some(failure);
    }
    if !faults.delay.is_zero() {
        tokio::time::sleep(faults.delay).await;
    }
    if happens(faults.server_error_rate) {
        return Some(Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServerError",
            "Injected fault: the server is unavailable".to_owned(),
        ));
    }
    if mutating && happens(faults.conflict_rate) {
        return Some(Failure::new(
            StatusCode::CONFLICT,
            "Conflict",
            "Injected fault: the object was modified concurrently".to_owned(),
        ));
    }
    None
}

/// Whether an event of probability `rate` happens this time.
fn happens(rate: f64) -> bool {
    rate > 0.0 && fastrand::f64() < rate
}
