use std::collections::VecDeque;
use std::time::Duration;

use cloud_provider::CloudError;
use tokio::time::Instant;

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
        }
    }
}

#[derive(Debug)]
struct Injection {
    op: Option<Operation>,
    error: InjectedError,
    remaining: u32,
}

/// A token bucket: `qps` tokens a second, at most `burst` saved up.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Takes a token, or says how long until one is available.
    pub(crate) fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// Everything that makes the fake misbehave on purpose.
#[derive(Debug)]
pub(crate) struct Faults {
    pub(crate) latency: Duration,
    pub(crate) error_rate: f64,
    pub(crate) bucket: Option<TokenBucket>,
    rng: u64,
    injections: VecDeque<Injection>,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            latency: Duration::ZERO,
            error_rate: 0.0,
            bucket: None,
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

    /// Decides the fate of one call: throttled, an injected error, a random
    /// error, or through.
    pub(crate) fn admit(&mut self, op: Operation, now: Instant) -> Result<(), CloudError> {
        if let Some(bucket) = &mut self.bucket {
            bucket
                .try_take(now)
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
