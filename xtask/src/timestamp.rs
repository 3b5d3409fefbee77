//! Times as Kubernetes objects and OCI images record them: RFC 3339 in UTC,
//! to the second (`2023-11-14T22:13:20Z`).

use jiff::{RoundMode, Timestamp, TimestampRound, Unit};

/// `time` as RFC 3339 in UTC, to the second: any fraction of a second is
/// dropped, as Kubernetes writes `creationTimestamp` and OCI `created`.
pub(crate) fn rfc3339(time: Timestamp) -> String {
    let whole_seconds = TimestampRound::new()
        .smallest(Unit::Second)
        .mode(RoundMode::Floor);
    // Rounding down fails only below the earliest representable second.
    time.round(whole_seconds).unwrap_or(time).to_string()
}

/// The current time as [`rfc3339`] writes it.
pub(crate) fn now() -> String {
    rfc3339(Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64, nanoseconds: i32) -> String {
        rfc3339(Timestamp::new(seconds, nanoseconds).unwrap())
    }

    #[test]
    fn times_are_written_in_utc_to_the_second() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000, 0), "2023-11-14T22:13:20Z");
        assert_eq!(at(1_790_000_000, 0), "2026-09-21T14:13:20Z");
    }

    #[test]
    fn a_fraction_of_a_second_is_dropped_not_rounded() {
        assert_eq!(at(1_700_000_000, 999_999_999), "2023-11-14T22:13:20Z");
        assert_eq!(at(-1, 500_000_000), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn now_is_a_whole_second() {
        let now = now();
        assert!(now.ends_with('Z') && !now.contains('.'), "{now}");
    }
}
