//! Deadlines from periods that come from flags: a period too long to add
//! to the clock (an operator's "never") waits a century instead of
//! panicking on overflow.

use std::time::Duration;

use tokio::time::Instant;

/// A deadline this far away stands for "never".
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// `now + period`, or [`FAR_FUTURE`] from now when that overflows or is
/// further.
pub(crate) fn far_deadline(now: Instant, period: Duration) -> Instant {
    now.checked_add(period.min(FAR_FUTURE))
        .unwrap_or_else(|| now + Duration::from_secs(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_period_never_overflows() {
        let now = Instant::now();
        assert_eq!(far_deadline(now, Duration::MAX), now + FAR_FUTURE);
        assert_eq!(
            far_deadline(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
    }
}
