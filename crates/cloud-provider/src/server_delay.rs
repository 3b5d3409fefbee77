//! Delays a server asks for (`Retry-After`, `RateLimit-Reset`, a delay in
//! an error body): read with checked arithmetic and clamped to
//! [`MAX_SERVER_DELAY`], so that no answer, however malformed or hostile,
//! panics the caller or parks an object for years.
//!
//! Providers read such headers with [`parse_retry_after`] and
//! [`until_unix_time`]; [`CloudError::requested_delay`] and the framework's
//! requeue clamp again, so a provider that forgets still cannot requeue an
//! object beyond the ceiling.
//!
//! [`CloudError::requested_delay`]: crate::CloudError::requested_delay

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest delay any server may impose: five minutes, the same as the
/// ceiling of the per-object failure backoff, so a throttled object is never
/// retried later than a failing one.
pub const MAX_SERVER_DELAY: Duration = Duration::from_secs(300);

/// `delay`, at most [`MAX_SERVER_DELAY`].
pub fn clamp_delay(delay: Duration) -> Duration {
    delay.min(MAX_SERVER_DELAY)
}

/// A delay given in (possibly fractional) seconds, clamped.
///
/// `None` for NaN, which says nothing; a negative delay is no delay, and
/// anything longer than the ceiling (infinity included) is the ceiling.
/// Never panics, unlike [`Duration::from_secs_f64`].
pub fn delay_from_secs_f64(secs: f64) -> Option<Duration> {
    if secs.is_nan() {
        return None;
    }
    if secs <= 0.0 {
        return Some(Duration::ZERO);
    }
    if secs >= MAX_SERVER_DELAY.as_secs_f64() {
        return Some(MAX_SERVER_DELAY);
    }
    Duration::try_from_secs_f64(secs).ok().map(clamp_delay)
}

/// How long from `now` until `at`, clamped; zero when `at` has passed.
pub fn until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now).map_or(Duration::ZERO, clamp_delay)
}

/// `now` plus a delay, the delay clamped first. Saturates at `now` itself
/// in the (theoretical) case where the clock cannot represent the sum.
pub fn deadline_after(now: SystemTime, delay: Duration) -> SystemTime {
    now.checked_add(clamp_delay(delay)).unwrap_or(now)
}

/// A `Retry-After` value (RFC 9110 §10.2.3), as the delay from `now`,
/// clamped.
///
/// Reads both forms: delay-seconds (`120`; a fractional `1.5`, which some
/// servers send, is accepted) and an HTTP-date (`Sun, 06 Nov 1994 08:49:37
/// GMT`, and the obsolete RFC 850 and asctime forms). A date already past is
/// no delay. `None` when the value is neither form.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Some(delay) = parse_seconds(value) {
        return Some(delay);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(until(at, now))
}

/// A reset time given as seconds since the Unix epoch (DigitalOcean's
/// `RateLimit-Reset`), as the delay from `now`, clamped. A time already
/// past is no delay; `None` when the value is not a whole number.
pub fn until_unix_time(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Too many digits for a u64 is a time beyond any clock: the ceiling.
    let Ok(secs) = value.parse::<u64>() else {
        return Some(MAX_SERVER_DELAY);
    };
    Some(
        UNIX_EPOCH
            .checked_add(Duration::from_secs(secs))
            .map_or(MAX_SERVER_DELAY, |at| until(at, now)),
    )
}

/// Delay-seconds: digits, optionally with a fraction; nothing else (no
/// sign, no exponent, no `inf` or `NaN`, which `f64::from_str` would take).
fn parse_seconds(value: &str) -> Option<Duration> {
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    if value.ends_with('.') {
        return None;
    }
    if fraction.is_empty() {
        return Some(match whole.parse::<u64>() {
            Ok(secs) => clamp_delay(Duration::from_secs(secs)),
            Err(_) => MAX_SERVER_DELAY,
        });
    }
    value.parse::<f64>().ok().and_then(delay_from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// 2026-12-06T00:00:00Z.
    const NOW: u64 = 1_796_515_200;

    #[test]
    fn the_ceiling_is_five_minutes() {
        assert_eq!(MAX_SERVER_DELAY, Duration::from_secs(5 * 60));
        assert_eq!(clamp_delay(Duration::MAX), MAX_SERVER_DELAY);
        assert_eq!(clamp_delay(Duration::from_secs(7)), Duration::from_secs(7));
    }

    #[test]
    fn fractional_seconds_never_panic_and_stay_under_the_ceiling() {
        assert_eq!(delay_from_secs_f64(f64::NAN), None);
        assert_eq!(delay_from_secs_f64(-3.0), Some(Duration::ZERO));
        assert_eq!(delay_from_secs_f64(f64::NEG_INFINITY), Some(Duration::ZERO));
        assert_eq!(delay_from_secs_f64(f64::INFINITY), Some(MAX_SERVER_DELAY));
        assert_eq!(delay_from_secs_f64(f64::MAX), Some(MAX_SERVER_DELAY));
        assert_eq!(delay_from_secs_f64(1e30), Some(MAX_SERVER_DELAY));
        assert_eq!(delay_from_secs_f64(1.5), Some(Duration::from_millis(1500)));
        assert_eq!(delay_from_secs_f64(f64::MIN_POSITIVE), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_seconds_are_read_and_clamped() {
        let now = at(NOW);
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("301", now), Some(MAX_SERVER_DELAY));
        assert_eq!(
            parse_retry_after(&u64::MAX.to_string(), now),
            Some(MAX_SERVER_DELAY)
        );
        // More digits than a u64 holds: overflow is the ceiling, not a panic.
        assert_eq!(
            parse_retry_after("99999999999999999999999999999", now),
            Some(MAX_SERVER_DELAY)
        );
        assert_eq!(
            parse_retry_after("2.5", now),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(
            parse_retry_after(&format!("1{}.0", "0".repeat(400)), now),
            Some(MAX_SERVER_DELAY)
        );
    }

    #[test]
    fn retry_after_refuses_what_is_not_a_delay() {
        let now = at(NOW);
        for bad in [
            "", "-5", "+5", "NaN", "nan", "inf", "infinity", "1e9", "5.", ".5", "1.2.3", "soon",
            "5 s", "0x10",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_dates_count_from_now_and_are_clamped() {
        let now = at(NOW);
        assert_eq!(
            parse_retry_after("Sun, 06 Dec 2026 00:01:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        // The obsolete forms RFC 9110 still asks recipients to read.
        assert_eq!(
            parse_retry_after("Sunday, 06-Dec-26 00:01:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            parse_retry_after("Sun Dec  6 00:01:30 2026", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now),
            Some(MAX_SERVER_DELAY),
            "a date far in the future is the ceiling"
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO),
            "a date past is no delay"
        );
        assert_eq!(parse_retry_after("Sun, 06 Dec 2026", now), None);
    }

    #[test]
    fn reset_times_count_from_now_and_are_clamped() {
        let now = at(NOW);
        assert_eq!(
            until_unix_time(&(NOW + 30).to_string(), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            until_unix_time(&(NOW - 30).to_string(), now),
            Some(Duration::ZERO)
        );
        // u64::MAX seconds after the epoch: `UNIX_EPOCH + ...` would panic.
        assert_eq!(
            until_unix_time(&u64::MAX.to_string(), now),
            Some(MAX_SERVER_DELAY)
        );
        assert_eq!(
            until_unix_time("184467440737095516150", now),
            Some(MAX_SERVER_DELAY)
        );
        for bad in ["", "-1", "1.5", "NaN", "soon"] {
            assert_eq!(until_unix_time(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn deadlines_are_clamped_and_never_overflow() {
        let now = at(NOW);
        assert_eq!(deadline_after(now, Duration::MAX), now + MAX_SERVER_DELAY);
        assert_eq!(
            deadline_after(now, Duration::from_secs(2)),
            now + Duration::from_secs(2)
        );
        assert_eq!(
            until(now + Duration::from_secs(3600 * 24 * 365), now),
            MAX_SERVER_DELAY
        );
        assert_eq!(until(at(0), now), Duration::ZERO);
    }
}
