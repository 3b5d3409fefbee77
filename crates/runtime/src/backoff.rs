//! Per-object exponential backoff.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use parking_lot::Mutex;

/// Upstream's controller default: the first wait.
const CONTROLLER_BASE: Duration = Duration::from_secs(5);
/// Upstream's controller default: the longest wait.
const CONTROLLER_MAX: Duration = Duration::from_secs(300);

/// `base` doubled once per failure before this one, at most `max`.
fn doubled(base: Duration, max: Duration, before: u32) -> Duration {
    base.saturating_mul(1u32.checked_shl(before).unwrap_or(u32::MAX))
        .min(max)
}

/// The wait [`FailureBackoff::controller_default`] gives after the
/// `failures`th consecutive failure (1 for the first; 0 reads as 1), for a
/// controller that must know when the runtime retries.
pub fn controller_delay(failures: u32) -> Duration {
    doubled(CONTROLLER_BASE, CONTROLLER_MAX, failures.saturating_sub(1))
}

/// Upstream's failure backoff: the first failure waits `base`, each further
/// consecutive failure doubles it, up to `max`; a success resets it.
#[derive(Debug)]
pub struct FailureBackoff<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Hash + Eq> FailureBackoff<K> {
    /// A backoff from `base` doubling to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Upstream's controller default: 5 s doubling to 300 s.
    pub fn controller_default() -> Self {
        Self::new(CONTROLLER_BASE, CONTROLLER_MAX)
    }

    /// Records a failure of `key` and returns how long to wait before the
    /// next attempt.
    pub fn fail(&self, key: K) -> Duration {
        let mut failures = self.failures.lock();
        let n = failures.entry(key).or_insert(0);
        let delay = doubled(self.base, self.max, *n);
        *n = n.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key`.
    pub fn reset(&self, key: &K) {
        self.failures.lock().remove(key);
    }

    /// Forgets the failures of every key `gone` matches (objects deleted
    /// while they were backing off), so the map does not grow with them.
    pub fn forget_where(&self, gone: impl Fn(&K) -> bool) {
        self.failures.lock().retain(|key, _| !gone(key));
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures.lock().get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_delay_is_what_the_controller_default_waits() {
        let waits: Vec<u64> = (1..=9).map(|n| controller_delay(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(controller_delay(u32::MAX).as_secs(), 300);
        assert_eq!(controller_delay(0).as_secs(), 5);
        let backoff = FailureBackoff::controller_default();
        for n in 1..=9 {
            assert_eq!(backoff.fail("k"), controller_delay(n));
        }
    }

    #[test]
    fn failures_of_deleted_objects_are_forgotten() {
        let backoff = FailureBackoff::controller_default();
        backoff.fail("default/gone");
        backoff.fail("default/gone");
        backoff.fail("default/kept");
        backoff.forget_where(|key| *key == "default/gone");
        assert_eq!(backoff.failures(&"default/gone"), 0);
        assert_eq!(backoff.failures(&"default/kept"), 1);
        assert_eq!(backoff.failures.lock().len(), 1, "no entry is left behind");
    }

    #[test]
    fn doubles_from_five_seconds_to_five_minutes_and_resets() {
        let backoff = FailureBackoff::controller_default();
        let delays: Vec<u64> = (0..9).map(|_| backoff.fail("svc").as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(
            backoff.fail("other").as_secs(),
            5,
            "keys back off independently"
        );
        backoff.reset(&"svc");
        assert_eq!(backoff.failures(&"svc"), 0);
        assert_eq!(backoff.fail("svc").as_secs(), 5);
    }

    #[test]
    fn many_failures_never_overflow() {
        let backoff = FailureBackoff::new(Duration::from_secs(5), Duration::from_secs(300));
        for _ in 0..100 {
            assert!(backoff.fail(1) <= Duration::from_secs(300));
        }
    }
}
