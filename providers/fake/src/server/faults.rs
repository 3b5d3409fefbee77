//! Faults the server adds in front of the cloud, as a struggling cloud API
//! behaves: some calls are throttled, some answer 503, and some time out
//! after the cloud applied them, so the caller cannot tell whether they
//! happened.

use std::time::Duration;

use serde::Deserialize;

/// How long a timed-out call keeps its caller waiting.
pub(crate) const TIMEOUT_AFTER: Duration = Duration::from_millis(1500);
/// The delay a throttled answer asks for.
pub(crate) const THROTTLED_FOR: Duration = Duration::from_millis(500);

/// What `PUT /faults` may set; absent fields stay as they are.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultSettings {
    pub(crate) latency_ms: Option<u64>,
    pub(crate) error_rate: Option<f64>,
    /// `0` removes the rate limit.
    pub(crate) rate_limit_qps: Option<f64>,
    pub(crate) rate_limit_burst: Option<u32>,
}

/// A fault one call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    Throttled,
    Unavailable,
    /// The call is made, then its answer is lost.
    Timeout,
}

#[derive(Debug)]
pub(crate) struct ServerFaults {
    error_rate: f64,
    rng: fastrand::Rng,
}

impl ServerFaults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            error_rate: 0.0,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    pub(crate) fn set_error_rate(&mut self, rate: f64) {
        self.error_rate = rate;
    }

    /// The fault the next call gets, if any: a fraction `error_rate` of
    /// calls fail, a third each way.
    pub(crate) fn draw(&mut self) -> Option<Fault> {
        if self.error_rate <= 0.0 || self.rng.f64() >= self.error_rate {
            return None;
        }
        Some(match self.rng.u8(0..3) {
            0 => Fault::Throttled,
            1 => Fault::Unavailable,
            _ => Fault::Timeout,
        })
    }
}
