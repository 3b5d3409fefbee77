//! Pacing cloud calls after the cloud says "too many".

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The longest spacing the pacer imposes between call starts.
const MAX_INTERVAL: Duration = Duration::from_secs(5);
/// Below this the spacing is dropped: the cloud has room again.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct State {
    /// When the next call may start.
    next: Instant,
    /// Spacing between call starts; zero while the cloud is not throttling.
    interval: Duration,
}

/// Spaces calls once the cloud throttles: after `Throttled { retry_after }`,
/// no call starts before `retry_after` has passed, and calls then start one
/// every `retry_after` (for a token bucket, its refill time: exactly the
/// rate it allows). Each success narrows the spacing by a tenth, so the rate
/// creeps back up until the cloud throttles again.
///
/// Without it, a controller with many calls in flight (the route controller
/// allows 200) meets a 20-calls-a-second limit as a herd: most calls are
/// refused, retried together, and refused again.
#[derive(Debug)]
pub(crate) struct Pacer {
    state: Mutex<State>,
}

impl Default for Pacer {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                next: Instant::now(),
                interval: Duration::ZERO,
            }),
        }
    }
}

impl Pacer {
    /// Waits for this call's turn.
    pub(crate) async fn wait_turn(&self) {
        let start = {
            let mut state = self.state.lock();
            if state.interval.is_zero() && state.next <= Instant::now() {
                return;
            }
            let start = state.next.max(Instant::now());
            state.next = start + state.interval;
            start
        };
        tokio::time::sleep_until(start).await;
    }

    /// The cloud refused a call: wait `retry_after`, then space calls by it.
    pub(crate) fn throttled(&self, retry_after: Duration) {
        let retry_after = retry_after.clamp(MIN_INTERVAL, MAX_INTERVAL);
        let mut state = self.state.lock();
        state.interval = state.interval.max(retry_after);
        state.next = state.next.max(Instant::now() + retry_after);
    }

    /// A call went through: narrow the spacing.
    pub(crate) fn succeeded(&self) {
        let mut state = self.state.lock();
        if !state.interval.is_zero() {
            state.interval = state.interval.mul_f64(0.9);
            if state.interval < MIN_INTERVAL {
                state.interval = Duration::ZERO;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn unthrottled_calls_never_wait() {
        let pacer = Pacer::default();
        let start = Instant::now();
        for _ in 0..100 {
            pacer.wait_turn().await;
            pacer.succeeded();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_throttle_calls_start_one_per_retry_after() {
        let pacer = Pacer::default();
        pacer.throttled(Duration::from_millis(50));
        let start = Instant::now();
        for _ in 0..4 {
            pacer.wait_turn().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(200),
            "the wait, then 3 spaced starts"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn successes_narrow_the_spacing_until_it_is_gone() {
        let pacer = Pacer::default();
        pacer.throttled(Duration::from_millis(10));
        for _ in 0..100 {
            pacer.succeeded();
        }
        tokio::time::advance(Duration::from_millis(20)).await;
        let start = Instant::now();
        pacer.wait_turn().await;
        pacer.wait_turn().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
