//! How many cloud mutations of one class may be in flight: a limit that
//! halves when the cloud answers `Throttled` and grows back by one per
//! window of successes (AIMD, as TCP's congestion window), after a slow
//! start: from [`INITIAL`], one more per success until the first refusal,
//! so that a burst's first round is not a herd of refused calls.
//!
//! The pacer spaces call starts once the cloud throttles; this bounds what
//! is already started. Without it, the up to 200 route creates the route
//! controller keeps in flight all reach a throttling cloud, and most are
//! refused and retried (the route burst cost 2.21 calls per route).
//!
//! Hand-written rather than a crate's: the maintained AIMD limiters are
//! `tower` layers or `reqwest` middleware around HTTP clients, and these
//! calls are neither; the whole algorithm is the few lines of
//! [`Permit::throttled`] and [`Permit::succeeded`].

use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

/// The limit a class starts at.
pub(crate) const INITIAL: usize = 10;

#[derive(Debug)]
struct State {
    /// The current limit; its floor (at least 1) calls may be in flight.
    limit: f64,
    in_flight: usize,
    /// Bumped at each decrease: the throttled answers of calls started
    /// before it are the same congestion event, counted once.
    epoch: u64,
    /// No refusal yet: each success adds one.
    slow_start: bool,
}

/// An adaptive limit on concurrent calls of one class.
#[derive(Debug)]
pub(crate) struct AdaptiveLimit {
    state: Mutex<State>,
    freed: Notify,
    max: usize,
    gauge: Gauge,
}

impl AdaptiveLimit {
    /// A limit starting at [`INITIAL`] and never above `max`, exported on
    /// `gauge`.
    pub(crate) fn new(max: usize, gauge: Gauge) -> Self {
        let max = max.max(1);
        let initial = INITIAL.min(max);
        gauge.set(initial as i64);
        Self {
            state: Mutex::new(State {
                limit: initial as f64,
                in_flight: 0,
                epoch: 0,
                slow_start: true,
            }),
            freed: Notify::new(),
            max,
            gauge,
        }
    }

    /// How many calls may be in flight now.
    #[cfg(test)]
    pub(crate) fn current(&self) -> usize {
        allowed(self.state.lock().limit)
    }

    /// Waits for room, then holds it until the permit is given back.
    pub(crate) async fn acquire(&self) -> Permit<'_> {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.in_flight < allowed(state.limit) {
                    state.in_flight += 1;
                    return Permit {
                        owner: self,
                        epoch: state.epoch,
                        done: false,
                    };
                }
            }
            freed.await;
        }
    }

    fn release(&self, state: &mut State) {
        state.in_flight -= 1;
        self.gauge.set(allowed(state.limit) as i64);
        for _ in state.in_flight..allowed(state.limit) {
            self.freed.notify_one();
        }
    }
}

fn allowed(limit: f64) -> usize {
    (limit.floor() as usize).max(1)
}

/// Room for one call, given back with the call's outcome.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    owner: &'a AdaptiveLimit,
    epoch: u64,
    done: bool,
}

impl Permit<'_> {
    /// The cloud answered `Throttled`: halve the limit, once per
    /// congestion event.
    pub(crate) fn throttled(mut self) {
        let owner = self.owner;
        let mut state = owner.state.lock();
        if self.epoch == state.epoch {
            state.limit = (state.limit / 2.0).max(1.0);
            state.epoch += 1;
            state.slow_start = false;
        }
        self.done = true;
        owner.release(&mut state);
    }

    /// The call went through: one more call per window of successes (per
    /// success in the slow start).
    pub(crate) fn succeeded(mut self) {
        let owner = self.owner;
        let mut state = owner.state.lock();
        let step = if state.slow_start {
            1.0
        } else {
            1.0 / state.limit
        };
        state.limit = (state.limit + step).min(owner.max as f64);
        self.done = true;
        owner.release(&mut state);
    }
}

impl Drop for Permit<'_> {
    // Any other outcome, or a call cancelled in flight: the room is given
    // back and the limit left as it was.
    fn drop(&mut self) {
        if !self.done {
            let owner = self.owner;
            owner.release(&mut owner.state.lock());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn limit(max: usize) -> Arc<AdaptiveLimit> {
        Arc::new(AdaptiveLimit::new(max, Gauge::default()))
    }

    #[tokio::test]
    async fn a_limit_starts_small_and_doubles_each_round_until_refused() {
        let limit = limit(200);
        assert_eq!(limit.current(), INITIAL);
        let round: Vec<_> = futures::future::join_all((0..INITIAL).map(|_| limit.acquire())).await;
        for permit in round {
            permit.succeeded();
        }
        assert_eq!(limit.current(), 2 * INITIAL);
        for _ in 0..500 {
            limit.acquire().await.succeeded();
        }
        assert_eq!(limit.current(), 200, "never above its max");
    }

    #[tokio::test(start_paused = true)]
    async fn up_to_the_limit_calls_go_at_once() {
        let limit = limit(3);
        let permits = [
            limit.acquire().await,
            limit.acquire().await,
            limit.acquire().await,
        ];
        let fourth = tokio::time::timeout(Duration::from_millis(20), limit.acquire()).await;
        assert!(fourth.is_err(), "a fourth call waits");
        drop(permits);
        assert_eq!(limit.current(), 3, "other outcomes leave the limit alone");
    }

    #[tokio::test]
    async fn a_herd_of_throttled_answers_halves_the_limit_once() {
        let limit = limit(200);
        for _ in 0..190 {
            limit.acquire().await.succeeded();
        }
        let mut permits = Vec::new();
        for _ in 0..200 {
            permits.push(limit.acquire().await);
        }
        for permit in permits {
            permit.throttled();
        }
        assert_eq!(limit.current(), 100);
        limit.acquire().await.throttled();
        assert_eq!(
            limit.current(),
            50,
            "a call started after the decrease counts again"
        );
    }

    #[tokio::test]
    async fn successes_grow_the_limit_back_by_one_per_window_up_to_its_max() {
        let limit = limit(8);
        for _ in 0..4 {
            limit.acquire().await.throttled();
        }
        assert_eq!(limit.current(), 1);
        limit.acquire().await.succeeded();
        assert_eq!(limit.current(), 2);
        for _ in 0..3 {
            limit.acquire().await.succeeded();
        }
        assert_eq!(limit.current(), 3, "a window of successes at 2: one more");
        for _ in 0..100 {
            limit.acquire().await.succeeded();
        }
        assert_eq!(limit.current(), 8);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_call_goes_when_room_is_given_back() {
        let limit = limit(1);
        let first = limit.acquire().await;
        let waiting = tokio::spawn({
            let limit = limit.clone();
            async move {
                limit.acquire().await.succeeded();
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished());
        first.succeeded();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken")
            .expect("no panic");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_passes_its_turn_on() {
        let limit = limit(1);
        let first = limit.acquire().await;
        let cancelled = tokio::time::timeout(Duration::from_millis(5), limit.acquire()).await;
        assert!(cancelled.is_err());
        let next = tokio::spawn({
            let limit = limit.clone();
            async move { drop(limit.acquire().await) }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .expect("the next waiter goes")
            .expect("no panic");
    }
}
