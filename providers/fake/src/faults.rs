//! What makes the fake misbehave on purpose: latency, errors injected or
//! at random, and a rate limit answering Throttled.

use std::collections::VecDeque;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, RateLimiter};

use crate::Operation;

/// An error the fake answers with on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InjectedError {
    /// [`CloudError::InstanceNotFound`].
    NotFound,
    /// [`CloudError::Throttled`].
    Throttled {
        /// The delay the fake asks for.
        retry_after: Duration,
    },
    /// [`CloudError::Retry`].
    Retry {
        /// The delay the fake asks for.
        after: Duration,
    },
    /// [`CloudError::ImplementedElsewhere`].
    ImplementedElsewhere,
    /// A general [`CloudError::Other`] with this message.
    Other(String),
    /// [`CloudError::QuotaExceeded`] with this message.
    QuotaExceeded(String),
}

impl InjectedError {
    pub(crate) fn to_cloud_error(&self) -> CloudError {
        match self {
            Self::NotFound => CloudError::InstanceNotFound,
            Self::Throttled { retry_after } => CloudError::Throttled {
                retry_after: *retry_after,
            },
            Self::Retry { after } => CloudError::Retry {
                after: *after,
                reason: "injected by the fake cloud".into(),
            },
            Self::ImplementedElsewhere => CloudError::ImplementedElsewhere,
            Self::Other(message) => CloudError::msg(message.clone()),
            Self::QuotaExceeded(message) => CloudError::QuotaExceeded {
                message: message.clone(),
            },
        }
    }
}

#[derive(Debug)]
struct Injection {
    op: Option<Operation>,
    error: InjectedError,
    remaining: u32,
}

/// Everything that makes the fake misbehave on purpose.
#[derive(Debug)]
pub(crate) struct Faults {
    pub(crate) latency: Duration,
    pub(crate) error_rate: f64,
    /// The cloud's own limit: beyond it calls answer Throttled at once.
    pub(crate) rate_limit: Option<RateLimiter>,
    rng: u64,
    injections: VecDeque<Injection>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            latency: Duration::ZERO,
            error_rate: 0.0,
            rate_limit: None,
            // xorshift must not start at zero.
            rng: seed | 1,
            injections: VecDeque::new(),
        }
    }

    pub(crate) fn inject(&mut self, op: Option<Operation>, error: InjectedError, times: u32) {
        if times > 0 {
            self.injections.push_back(Injection {
                op,
                error,
                remaining: times,
            });
        }
    }

    pub(crate) fn clear_injected(&mut self) {
        self.injections.clear();
    }

    /// Decides the fate of one call: throttled, an injected error, a random
    /// error, or through.
    pub(crate) fn admit(&mut self, op: Operation) -> Result<(), CloudError> {
        if let Some(limit) = &self.rate_limit {
            limit
                .try_acquire()
                .map_err(|retry_after| CloudError::Throttled { retry_after })?;
        }
        if let Some(pos) = self
            .injections
            .iter()
            .position(|i| i.op.is_none_or(|o| o == op))
        {
            let injection = &mut self.injections[pos];
            let err = injection.error.to_cloud_error();
            injection.remaining -= 1;
            if injection.remaining == 0 {
                self.injections.remove(pos);
            }
            return Err(err);
        }
        if self.error_rate > 0.0 && self.next_unit() < self.error_rate {
            return Err(CloudError::msg(format!(
                "{op}: random failure injected by the fake cloud"
            )));
        }
        Ok(())
    }

    /// A uniform number in [0, 1) from a xorshift64 generator: deterministic
    /// for a given seed, so a failing run can be replayed.
    fn next_unit(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        // 53 random bits make an f64 in [0, 1) exactly.
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}
