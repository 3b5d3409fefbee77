//! The server's rate-limit budget (`RateLimit-Remaining` /
//! `RateLimit-Reset`, and 429). Client-side pacing (`DO_API_RATE_LIMIT_QPS`)
//! is the workspace's [`ccm_cloud_provider::RateLimiter::pacer`].
//!
//! The server's times are not trusted: every wait they give is read with
//! checked arithmetic and held to [`MAX_SERVER_DELAY`].

use std::time::{Duration, SystemTime};

use ccm_cloud_provider::server_delay::{self, MAX_SERVER_DELAY};
use parking_lot::Mutex;
use reqwest::header::HeaderMap;

/// How long to wait after a 429 that names no reset time.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);
/// A reset already past, or a clock skew, still asks for a short pause.
const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The server's rate-limit budget, as its last answers described it.
#[derive(Debug, Default)]
pub(crate) struct ServerBudget {
    exhausted_until: Mutex<Option<SystemTime>>,
}

impl ServerBudget {
    /// `Some(wait)` while the server said the budget is spent.
    pub(crate) fn wait_needed(&self, now: SystemTime) -> Option<Duration> {
        let mut until = self.exhausted_until.lock();
        match *until {
            Some(t) if t > now => Some(server_delay::until(t, now).max(MIN_RETRY_AFTER)),
            Some(_) => {
                *until = None;
                None
            }
            None => None,
        }
    }

    /// Reads the rate-limit headers of an answer, `rate_limited` when it
    /// was a 429 for the rate limit (not one for the account's load
    /// balancer limit, which DigitalOcean also answers 429). Returns how
    /// long to wait when it was: until `RateLimit-Reset` (seconds since the
    /// epoch), else `Retry-After` (seconds or an HTTP-date), else a minute;
    /// at least a second and at most [`MAX_SERVER_DELAY`].
    pub(crate) fn observe(
        &self,
        rate_limited: bool,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Option<Duration> {
        // A reset already past (the answer was slow, or the clocks differ)
        // is the shortest pause, not the default: the server did name it.
        let reset = header(headers, "ratelimit-reset")
            .and_then(|v| server_delay::until_unix_time(v, now))
            .map(|wait| wait.max(MIN_RETRY_AFTER));
        let remaining =
            header(headers, "ratelimit-remaining").and_then(|v| v.trim().parse::<u64>().ok());
        let mut until = self.exhausted_until.lock();
        if rate_limited {
            let wait = reset
                .or_else(|| {
                    header(headers, "retry-after")
                        .and_then(|v| server_delay::parse_retry_after(v, now))
                })
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .clamp(MIN_RETRY_AFTER, MAX_SERVER_DELAY);
            *until = Some(server_delay::deadline_after(now, wait));
            return Some(wait);
        }
        if remaining == Some(0) {
            let wait = reset.unwrap_or(DEFAULT_RETRY_AFTER);
            *until = Some(server_delay::deadline_after(now, wait));
        }
        None
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use std::time::UNIX_EPOCH;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn throttled_429_waits_until_the_servers_reset() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let budget = ServerBudget::default();
        let wait = budget.observe(
            true,
            &headers(&[("ratelimit-reset", "1030"), ("ratelimit-remaining", "0")]),
            now,
        );
        assert_eq!(wait, Some(Duration::from_secs(30)));
        assert_eq!(
            budget.wait_needed(now + Duration::from_secs(10)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(budget.wait_needed(now + Duration::from_secs(31)), None);
    }

    #[test]
    fn a_spent_budget_holds_requests_back_until_reset() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let budget = ServerBudget::default();
        assert_eq!(
            budget.observe(
                false,
                &headers(&[("ratelimit-remaining", "5"), ("ratelimit-reset", "1060")]),
                now
            ),
            None
        );
        assert_eq!(budget.wait_needed(now), None, "budget left");
        budget.observe(
            false,
            &headers(&[("ratelimit-remaining", "0"), ("ratelimit-reset", "1060")]),
            now,
        );
        assert_eq!(budget.wait_needed(now), Some(Duration::from_secs(60)));
    }

    #[test]
    fn a_reset_far_away_or_overflowing_waits_at_most_five_minutes() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        for reset in [
            "100000000".to_owned(),
            u64::MAX.to_string(),
            "99999999999999999999999".to_owned(),
        ] {
            let budget = ServerBudget::default();
            let wait = budget.observe(true, &headers(&[("ratelimit-reset", &reset)]), now);
            assert_eq!(wait, Some(MAX_SERVER_DELAY), "{reset}");
            assert_eq!(budget.wait_needed(now), Some(MAX_SERVER_DELAY), "{reset}");
            assert_eq!(
                budget.wait_needed(now + MAX_SERVER_DELAY + Duration::from_secs(1)),
                None,
                "{reset}: held no longer than the ceiling"
            );
            let spent = ServerBudget::default();
            spent.observe(
                false,
                &headers(&[("ratelimit-remaining", "0"), ("ratelimit-reset", &reset)]),
                now,
            );
            assert_eq!(spent.wait_needed(now), Some(MAX_SERVER_DELAY), "{reset}");
        }
    }

    #[test]
    fn retry_after_is_read_in_both_forms_and_clamped() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
        for (value, wait) in [
            ("12", Duration::from_secs(12)),
            ("0", MIN_RETRY_AFTER),
            ("18446744073709551615", MAX_SERVER_DELAY),
            ("Sun, 06 Nov 1994 08:50:17 GMT", Duration::from_secs(40)),
            ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_SERVER_DELAY),
            ("NaN", DEFAULT_RETRY_AFTER),
            ("-5", DEFAULT_RETRY_AFTER),
        ] {
            let budget = ServerBudget::default();
            assert_eq!(
                budget.observe(true, &headers(&[("retry-after", value)]), now),
                Some(wait),
                "{value}"
            );
        }
    }

    #[test]
    fn a_reset_already_past_is_a_second_not_a_minute() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let past = [("ratelimit-reset", "999"), ("ratelimit-remaining", "0")];
        let budget = ServerBudget::default();
        assert_eq!(
            budget.observe(true, &headers(&past), now),
            Some(MIN_RETRY_AFTER)
        );
        assert_eq!(budget.wait_needed(now), Some(MIN_RETRY_AFTER));
        assert_eq!(budget.wait_needed(now + MIN_RETRY_AFTER), None);
        let spent = ServerBudget::default();
        assert_eq!(spent.observe(false, &headers(&past), now), None);
        assert_eq!(spent.wait_needed(now), Some(MIN_RETRY_AFTER));
    }

    #[test]
    fn a_429_without_headers_waits_a_minute() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let wait = ServerBudget::default().observe(true, &HeaderMap::new(), now);
        assert_eq!(wait, Some(DEFAULT_RETRY_AFTER));
    }
}
