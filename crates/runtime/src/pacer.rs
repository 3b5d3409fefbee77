//! Pacing cloud calls after the cloud says "too many".

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The longest spacing the pacer imposes between call starts.
const MAX_INTERVAL: Duration = Duration::from_secs(5);
/// Below this the spacing is dropped: the cloud has room again.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// Successes the cloud's rate is measured over.
const SAMPLE: usize = 32;
/// The fewest recent successes that measure a rate.
const MIN_SAMPLE: usize = 5;
/// Successes older than this say nothing of the cloud's rate now.
const SAMPLE_AGE: Duration = Duration::from_secs(10);
/// How much each success narrows the spacing: slowly, so that the rate
/// creeps past the cloud's limit only every few hundred calls.
const NARROWING: f64 = 0.999;
/// With no refusal for this long, calls are no longer spaced.
const QUIET: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct State {
    /// When the next call may start.
    next: Instant,
    /// Spacing between call starts; zero while the cloud is not throttling.
    interval: Duration,
    /// When the last successes came back, oldest first: the rate the cloud
    /// allowed.
    recent: VecDeque<Instant>,
    /// When the cloud last refused a call.
    last_refusal: Instant,
}

impl State {
    /// The spacing of the recent successes, when there are enough of them.
    fn measured(&self, now: Instant) -> Option<Duration> {
        let fresh: Vec<Instant> = self
            .recent
            .iter()
            .copied()
            .filter(|t| now - *t <= SAMPLE_AGE)
            .collect();
        let (first, last) = (fresh.first()?, fresh.last()?);
        (fresh.len() >= MIN_SAMPLE).then(|| (*last - *first) / (fresh.len() - 1) as u32)
    }
}

/// Spaces calls once the cloud throttles.
///
/// After `Throttled { retry_after }` no call starts before `retry_after`
/// has passed, and calls then start at the rate the cloud allowed just
/// before (the spacing of the last successes), or one every `retry_after`
/// if that is longer (for a token bucket, its refill time). Each success narrows the spacing by a tenth of a
/// percent, so the rate creeps up until the cloud refuses again and is
/// measured anew; after [`QUIET`] without a refusal, spacing stops.
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
                recent: VecDeque::with_capacity(SAMPLE),
                last_refusal: Instant::now(),
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

    /// The cloud refused a call: wait `retry_after`, then space calls at
    /// the rate it allowed just before, or by `retry_after` if longer.
    pub(crate) fn throttled(&self, retry_after: Duration) {
        let retry_after = retry_after.clamp(MIN_INTERVAL, MAX_INTERVAL);
        let now = Instant::now();
        let mut state = self.state.lock();
        // Never closer than the cloud asked: a burst of successes (a full
        // bucket) measures a rate the cloud cannot sustain.
        let measured = state.measured(now).unwrap_or(state.interval);
        state.interval = measured.max(retry_after);
        state.next = state.next.max(now + retry_after);
        state.last_refusal = now;
    }

    /// A call went through: narrow the spacing.
    pub(crate) fn succeeded(&self) {
        let now = Instant::now();
        let mut state = self.state.lock();
        if state.recent.len() == SAMPLE {
            state.recent.pop_front();
        }
        state.recent.push_back(now);
        if !state.interval.is_zero() {
            state.interval = state.interval.mul_f64(NARROWING);
            if state.interval < MIN_INTERVAL || now - state.last_refusal > QUIET {
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
    async fn after_a_quiet_spell_calls_are_no_longer_spaced() {
        let pacer = Pacer::default();
        pacer.throttled(Duration::from_millis(10));
        for _ in 0..3 {
            pacer.wait_turn().await;
            pacer.succeeded();
        }
        tokio::time::advance(QUIET + Duration::from_millis(1)).await;
        pacer.succeeded();
        let start = Instant::now();
        pacer.wait_turn().await;
        pacer.wait_turn().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_spaces_calls_at_the_rate_that_went_through_before_it() {
        let pacer = Pacer::default();
        // Successes every 25 ms, then a refusal asking for 5 ms: calls are
        // spaced by the 25 ms the cloud sustained.
        for _ in 0..10 {
            pacer.succeeded();
            tokio::time::advance(Duration::from_millis(25)).await;
        }
        pacer.throttled(Duration::from_millis(5));
        let start = Instant::now();
        for _ in 0..3 {
            pacer.wait_turn().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(55),
            "the refusal's 5 ms, then two spacings of 25 ms"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn successes_narrow_the_spacing() {
        let pacer = Pacer::default();
        pacer.throttled(Duration::from_millis(100));
        for _ in 0..1_000 {
            pacer.succeeded();
        }
        let interval = pacer.state.lock().interval;
        assert!(
            interval < Duration::from_millis(40) && interval > Duration::from_millis(30),
            "a thousand successes narrow 100 ms by about 0.999^1000: {interval:?}"
        );
    }
}
