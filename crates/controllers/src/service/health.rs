//! When to ask the cloud for a load balancer's target health, decided
//! without I/O: at once after a change to the load balancer or a node's
//! shutdown, at most once a minute after node readiness flaps, then with
//! backoff while targets are not all healthy, and never for a steady
//! healthy load balancer, so a healthy cluster costs no cloud call.

use std::time::Duration;

use tokio::time::Instant;

use super::readiness::NodeSignals;

/// The wait after the first answer that is not all healthy.
pub(crate) const FIRST_DELAY: Duration = Duration::from_secs(5);
/// The longest wait between two asks: at most one call per load balancer
/// per minute while its targets stay unhealthy.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(60);

/// One Service's health asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HealthWatch {
    /// The provider cannot tell for this Service: not asked again until the
    /// load balancer changes.
    unsupported: bool,
    /// A change since the last answer: ask at once.
    changed: Option<Instant>,
    /// When the current unhealthy stretch began after a change, for the
    /// time-to-healthy histogram.
    since_change: Option<Instant>,
    /// The last answer, when it was not all healthy: when it came.
    unhealthy_at: Option<Instant>,
    /// The wait after `unhealthy_at`.
    delay: Duration,
    /// The node signals last seen.
    seen: NodeSignals,
    /// The last ask.
    last_ask: Option<Instant>,
    /// When to ask after readiness flaps.
    flap_due: Option<Instant>,
    /// The provider answered at least once.
    told: bool,
}

impl Default for HealthWatch {
    fn default() -> Self {
        Self {
            unsupported: false,
            changed: None,
            since_change: None,
            unhealthy_at: None,
            delay: FIRST_DELAY,
            seen: NodeSignals::default(),
            last_ask: None,
            flap_due: None,
            told: false,
        }
    }
}

impl HealthWatch {
    /// The load balancer changed at `now` (ensured, its nodes updated): ask
    /// at once, with the backoff reset.
    pub(crate) fn changed(&mut self, now: Instant) {
        self.unsupported = false;
        self.changed = Some(now);
        self.since_change.get_or_insert(now);
        self.unhealthy_at = None;
        self.delay = FIRST_DELAY;
    }

    /// The node signals are now `signals`: after a shutdown (the cloud
    /// confirmed an instance stopped or started) ask at once; after
    /// readiness flaps ask a minute after the last ask at the earliest, so
    /// flapping kubelets cost at most one call per load balancer a minute.
    /// Only for a Service whose health is followed.
    pub(crate) fn signals(&mut self, signals: NodeSignals, now: Instant) {
        if signals == self.seen {
            return;
        }
        let shutdown = signals.shutdowns != self.seen.shutdowns;
        self.seen = signals;
        if !self.watched() {
            return;
        }
        if shutdown {
            self.changed.get_or_insert(now);
            self.delay = FIRST_DELAY;
        } else {
            let earliest = self.last_ask.map_or(now, |at| (at + MAX_DELAY).max(now));
            self.flap_due = Some(self.flap_due.map_or(earliest, |due| due.min(earliest)));
        }
    }

    /// Whether this Service's health was ever asked for and could be told.
    pub(crate) fn watched(&self) -> bool {
        !self.unsupported && (self.told || self.changed.is_some())
    }

    /// How long until the next ask; `None` when none is due (healthy and
    /// unchanged, or the provider cannot tell).
    pub(crate) fn next(&self, now: Instant) -> Option<Duration> {
        if self.unsupported {
            return None;
        }
        if self.changed.is_some() {
            return Some(Duration::ZERO);
        }
        let backoff = self.unhealthy_at.map(|at| at + self.delay);
        [backoff, self.flap_due]
            .into_iter()
            .flatten()
            .min()
            .map(|at| at.saturating_duration_since(now))
    }

    /// The provider answered at `now`: `None` when it cannot tell,
    /// otherwise whether every target is healthy. Returns how long the
    /// targets took to become healthy since the change, when this answer
    /// ends such a stretch.
    pub(crate) fn answered(&mut self, healthy: Option<bool>, now: Instant) -> Option<Duration> {
        self.asked(now);
        match healthy {
            None => {
                self.unsupported = true;
                self.told = false;
                self.since_change = None;
                self.unhealthy_at = None;
                None
            }
            Some(true) => {
                self.told = true;
                self.unhealthy_at = None;
                self.delay = FIRST_DELAY;
                self.since_change
                    .take()
                    .map(|since| now.saturating_duration_since(since))
            }
            Some(false) => {
                self.told = true;
                self.back_off(now);
                None
            }
        }
    }

    /// The ask failed at `now`: asked again with backoff.
    pub(crate) fn failed(&mut self, now: Instant) {
        self.asked(now);
        self.back_off(now);
    }

    fn asked(&mut self, now: Instant) {
        self.changed = None;
        self.flap_due = None;
        self.last_ask = Some(now);
    }

    fn back_off(&mut self, now: Instant) {
        if self.unhealthy_at.is_some() {
            self.delay = (self.delay * 2).min(MAX_DELAY);
        }
        self.unhealthy_at = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn nothing_is_asked_before_a_change_nor_once_healthy() {
        let t0 = Instant::now();
        let mut watch = HealthWatch::default();
        assert_eq!(watch.next(t0), None);
        assert!(!watch.watched());
        watch.changed(t0);
        assert_eq!(watch.next(t0), Some(Duration::ZERO));
        assert_eq!(watch.answered(Some(true), t0 + secs(2)), Some(secs(2)));
        assert_eq!(watch.next(t0 + secs(3)), None);
        assert_eq!(watch.next(t0 + secs(3600)), None);
        assert!(watch.watched());
    }

    #[test]
    fn unhealthy_targets_are_asked_again_with_backoff_capped_at_a_minute() {
        let t0 = Instant::now();
        let mut watch = HealthWatch::default();
        watch.changed(t0);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..8 {
            assert_eq!(watch.answered(Some(false), now), None);
            let wait = watch.next(now).unwrap();
            waits.push(wait.as_secs());
            now += wait;
        }
        assert_eq!(waits, [5, 10, 20, 40, 60, 60, 60, 60]);
        // Healthy at last: the whole stretch since the change is reported.
        assert_eq!(watch.answered(Some(true), now), Some(now - t0));
        assert_eq!(watch.next(now), None);
    }

    #[test]
    fn a_change_resets_the_backoff_and_failures_back_off_too() {
        let t0 = Instant::now();
        let mut watch = HealthWatch::default();
        watch.changed(t0);
        watch.answered(Some(false), t0);
        watch.answered(Some(false), t0 + secs(5));
        assert_eq!(watch.next(t0 + secs(5)), Some(secs(10)));
        watch.changed(t0 + secs(6));
        assert_eq!(watch.next(t0 + secs(6)), Some(Duration::ZERO));
        watch.failed(t0 + secs(6));
        assert_eq!(watch.next(t0 + secs(6)), Some(secs(5)));
    }

    #[test]
    fn a_provider_that_cannot_tell_is_not_asked_until_the_next_change() {
        let t0 = Instant::now();
        let mut watch = HealthWatch::default();
        watch.changed(t0);
        assert_eq!(watch.answered(None, t0), None);
        assert_eq!(watch.next(t0), None);
        watch.signals(signals(3, 3), t0);
        assert_eq!(watch.next(t0), None, "node signals do not revive it");
        watch.changed(t0 + secs(1));
        assert_eq!(watch.next(t0 + secs(1)), Some(Duration::ZERO));
    }

    fn signals(flaps: u64, shutdowns: u64) -> NodeSignals {
        NodeSignals { flaps, shutdowns }
    }

    #[test]
    fn a_shutdown_asks_at_once_and_flaps_at_most_once_a_minute() {
        let t0 = Instant::now();
        let mut watch = HealthWatch::default();
        watch.signals(signals(1, 1), t0);
        assert_eq!(watch.next(t0), None, "never asked: nothing to revive");
        watch.changed(t0);
        watch.answered(Some(true), t0);
        watch.signals(signals(1, 1), t0 + secs(1));
        assert_eq!(watch.next(t0 + secs(1)), None, "the same signals");
        // Flaps: a minute after the last ask.
        watch.signals(signals(2, 1), t0 + secs(2));
        assert_eq!(watch.next(t0 + secs(2)), Some(secs(58)));
        watch.signals(signals(9, 1), t0 + secs(30));
        assert_eq!(
            watch.next(t0 + secs(30)),
            Some(secs(30)),
            "flaps do not stack"
        );
        watch.answered(Some(true), t0 + secs(60));
        assert_eq!(watch.next(t0 + secs(61)), None, "asked: nothing more due");
        watch.signals(signals(10, 1), t0 + secs(200));
        assert_eq!(
            watch.next(t0 + secs(200)),
            Some(Duration::ZERO),
            "long after the last ask"
        );
        watch.answered(Some(true), t0 + secs(200));
        // A shutdown: at once, even right after an ask.
        watch.signals(signals(10, 2), t0 + secs(201));
        assert_eq!(watch.next(t0 + secs(201)), Some(Duration::ZERO));
        assert_eq!(
            watch.answered(Some(false), t0 + secs(201)),
            None,
            "a shutdown is no load-balancer change to time"
        );
    }
}
