//! The server's rate-limit budget (`RateLimit-Remaining` /
//! `RateLimit-Reset`, and 429). Client-side pacing (`DO_API_RATE_LIMIT_QPS`)
//! is the workspace's [`cloud_provider::RateLimiter::pacer`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
            Some(t) if t > now => Some(
                t.duration_since(now)
                    .unwrap_or_default()
                    .max(MIN_RETRY_AFTER),
            ),
            Some(_) => {
                *until = None;
                None
            }
            None => None,
        }
    }

    /// Reads the rate-limit headers of an answer. Returns how long to wait
    /// when the answer was a 429.
    pub(crate) fn observe(
        &self,
        status: u16,
        headers: &HeaderMap,
        now: SystemTime,
    ) -> Option<Duration> {
        let reset =
            header_u64(headers, "ratelimit-reset").map(|s| UNIX_EPOCH + Duration::from_secs(s));
        let remaining = header_u64(headers, "ratelimit-remaining");
        let mut until = self.exhausted_until.lock();
        if status == 429 {
            let wait = reset
                .and_then(|r| r.duration_since(now).ok())
                .or_else(|| header_u64(headers, "retry-after").map(Duration::from_secs))
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .max(MIN_RETRY_AFTER);
            *until = Some(now + wait);
            return Some(wait);
        }
        if remaining == Some(0) {
            *until = Some(reset.unwrap_or(now + DEFAULT_RETRY_AFTER));
        }
        None
    }
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

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
            429,
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
                200,
                &headers(&[("ratelimit-remaining", "5"), ("ratelimit-reset", "1060")]),
                now
            ),
            None
        );
        assert_eq!(budget.wait_needed(now), None, "budget left");
        budget.observe(
            200,
            &headers(&[("ratelimit-remaining", "0"), ("ratelimit-reset", "1060")]),
            now,
        );
        assert_eq!(budget.wait_needed(now), Some(Duration::from_secs(60)));
    }

    #[test]
    fn a_429_without_headers_waits_a_minute() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let wait = ServerBudget::default().observe(429, &HeaderMap::new(), now);
        assert_eq!(wait, Some(DEFAULT_RETRY_AFTER));
    }
}
