//! The one client-side rate limiter of the workspace: `qps` calls a second
//! sustained, up to `burst` at once after a quiet period.
//!
//! It is `governor`'s GCRA (a token bucket measured in time, lock-free)
//! read from tokio's clock, so a test on a paused clock drives it with
//! `tokio::time::advance` and never sleeps on the wall clock. The Kubernetes
//! client and the providers all use it: a limiter that waits
//! ([`RateLimiter::acquire`]), one that answers "not yet, try in this long"
//! ([`RateLimiter::try_acquire`]), and a pacer with no burst
//! ([`RateLimiter::pacer`]) are the same type.

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::Quota;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};

/// The longest a full burst may take to refill. Beyond it governor's
/// nanosecond arithmetic could overflow; no real limit is anywhere near.
const MAX_REFILL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Tokio's clock, paused or not, as governor's time source.
///
/// `tokio::time::Instant::now()` is the paused clock inside a runtime whose
/// time is paused and the monotonic clock otherwise; its `std` form is an
/// instant governor already knows how to do arithmetic on.
#[derive(Debug, Clone, Copy, Default)]
struct TokioClock;

impl Clock for TokioClock {
    type Instant = std::time::Instant;

    fn now(&self) -> Self::Instant {
        tokio::time::Instant::now().into_std()
    }
}

type Gcra =
    governor::RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<std::time::Instant>>;

/// A rate limit that cannot be enforced.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum InvalidRateLimit {
    /// The rate is zero, negative, infinite or not a number.
    #[error("{qps} calls a second is not a positive, finite rate")]
    Qps {
        /// The rate asked for.
        qps: f64,
    },
    /// The rate is so slow that a full burst would take over a century to
    /// refill.
    #[error("{qps} calls a second with bursts of {burst} would take over a century to refill")]
    TooSlow {
        /// The rate asked for.
        qps: f64,
        /// The burst asked for.
        burst: u32,
    },
    /// A burst of zero would never let a call through.
    #[error("a burst must allow at least one call")]
    ZeroBurst,
}

/// Lets calls through at most `qps` a second, up to `burst` at once after a
/// quiet period.
///
/// # Guarantees
/// - In any window of `d` seconds at most `burst + qps × d` calls are let
///   through; a quiet period saves up at most `burst` calls.
/// - `try_acquire` never waits; its `Err` is the exact time until a call
///   would be let through, so a caller that waits that long and asks again
///   succeeds unless someone else took the call meanwhile.
/// - `acquire` serves its callers in the order they called; a caller that
///   stops waiting (its future dropped) takes nothing from the limit.
/// - Time is tokio's: `tokio::time::pause` and `advance` drive it.
///
/// # Assumptions
/// A limiter is used either through `acquire` or through `try_acquire`:
/// `try_acquire` does not queue, so mixing the two can take a call a queued
/// `acquire` was about to get (which then waits for the next one).
pub struct RateLimiter {
    gcra: Gcra,
    /// Waiters in `acquire`, first come first served (tokio's mutex is fair).
    queue: tokio::sync::Mutex<()>,
    qps: f64,
    burst: NonZeroU32,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter of `qps` calls a second with bursts of `burst`, full: the
    /// first `burst` calls go at once.
    ///
    /// # Errors
    /// [`InvalidRateLimit`] when `qps` is not a positive finite number, when
    /// `burst` is zero, or when the burst would take a century to refill.
    pub fn new(qps: f64, burst: u32) -> Result<Self, InvalidRateLimit> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(InvalidRateLimit::Qps { qps });
        }
        let burst = NonZeroU32::new(burst).ok_or(InvalidRateLimit::ZeroBurst)?;
        let period = Duration::try_from_secs_f64(1.0 / qps)
            .ok()
            .filter(|period| period.saturating_mul(burst.get()) <= MAX_REFILL)
            .ok_or(InvalidRateLimit::TooSlow {
                qps,
                burst: burst.get(),
            })?;
        // Faster than a call a nanosecond is no limit governor can count.
        let period = period.max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .expect("the period is at least a nanosecond")
            .allow_burst(burst);
        Ok(Self {
            gcra: Gcra::direct_with_clock(quota, TokioClock),
            queue: tokio::sync::Mutex::new(()),
            qps,
            burst,
        })
    }

    /// A pacer: calls start at least `1/qps` apart, with no burst saved up
    /// after a quiet period (`godo`'s `SetStaticRateLimit`).
    ///
    /// # Errors
    /// As [`RateLimiter::new`].
    pub fn pacer(qps: f64) -> Result<Self, InvalidRateLimit> {
        Self::new(qps, 1)
    }

    /// The sustained rate, in calls a second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// The most calls let through at once.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    /// Lets one call through now, or says how long until one would be.
    ///
    /// # Errors
    /// The time to wait, never zero, when the limit is spent.
    pub fn try_acquire(&self) -> Result<(), Duration> {
        // Read before the check, so that the wait is measured from a time
        // the check found too early: it cannot come out zero.
        let now = TokioClock.now();
        self.gcra
            .check()
            .map_err(|not_until| not_until.wait_time_from(now))
    }

    /// Waits until a call may go, in the order callers arrived, and takes
    /// it.
    pub async fn acquire(&self) {
        let _turn = self.queue.lock().await;
        while let Err(not_until) = self.gcra.check() {
            tokio::time::sleep_until(not_until.earliest_possible().into()).await;
        }
    }
}

#[cfg(test)]
mod tests;
