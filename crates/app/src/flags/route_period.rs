//! How often the route controller passes over every node and route without
//! a node event: `--route-reconciliation-period`, or, with upstream's alpha
//! gate `CloudControllerManagerWatchBasedRoutesReconciliation` (k8s.io/
//! cloud-provider 0.35 on), only on node events and at each resync of
//! upstream's node informer, which comes at a random interval between
//! `--min-resync-period` and twice it, drawn once at start.

use std::time::Duration;

/// Upstream's gate for watch-based route reconciliation.
pub(crate) const WATCH_BASED_ROUTES: &str = "CloudControllerManagerWatchBasedRoutesReconciliation";

/// `--min-resync-period`'s default upstream.
const MIN_RESYNC_DEFAULT: Duration = Duration::from_secs(12 * 3600);

/// The period between passes without a node event, and what to log once
/// about `--min-resync-period`.
///
/// With the gate, as upstream's `ResyncPeriod`: `--min-resync-period`
/// times a random factor in [1, 2), and `--route-reconciliation-period`
/// unused, as upstream leaves it. A zero minimum means informers that never
/// resync: no periodic pass at all ([`Duration::MAX`], which the
/// controller's schedule reads as never).
pub(crate) fn route_period(
    watch_based: bool,
    route_reconciliation_period: Duration,
    min_resync_period: Option<Duration>,
) -> (Duration, Option<String>) {
    if !watch_based {
        let note = min_resync_period.map(|_| format!("--min-resync-period: upstream's informers resync their caches at random intervals from this period; the watches here never resync, and with the {WATCH_BASED_ROUTES} feature gate off nothing here needs it"));
        return (route_reconciliation_period, note);
    }
    let min = min_resync_period.unwrap_or(MIN_RESYNC_DEFAULT);
    let period = if min.is_zero() {
        Duration::MAX
    } else {
        Duration::try_from_secs_f64(min.as_secs_f64() * (1.0 + fastrand::f64()))
            .unwrap_or(Duration::MAX)
    };
    (period, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_S: Duration = Duration::from_secs(10);

    #[test]
    fn without_the_gate_the_period_is_the_flags() {
        assert_eq!(route_period(false, TEN_S, None), (TEN_S, None));
        let (period, note) = route_period(false, TEN_S, Some(TEN_S));
        assert_eq!(period, TEN_S);
        assert!(
            note.is_some_and(|n| n.starts_with("--min-resync-period")),
            "the flag is said to mean nothing"
        );
    }

    #[test]
    fn with_the_gate_the_period_is_a_resync_between_once_and_twice_the_minimum() {
        let hour = Duration::from_secs(3600);
        let mut periods = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let (period, note) = route_period(true, TEN_S, None);
            assert!(
                (MIN_RESYNC_DEFAULT..2 * MIN_RESYNC_DEFAULT).contains(&period),
                "{period:?}"
            );
            assert_eq!(note, None);
            periods.insert(period);
            let (period, note) = route_period(true, TEN_S, Some(hour));
            assert!((hour..2 * hour).contains(&period), "{period:?}");
            assert_eq!(note, None, "the flag is used");
        }
        assert!(periods.len() > 90, "drawn at random: {}", periods.len());
    }

    #[test]
    fn with_the_gate_a_zero_or_endless_minimum_means_no_periodic_pass() {
        for min in [Duration::ZERO, Duration::MAX] {
            assert_eq!(route_period(true, TEN_S, Some(min)), (Duration::MAX, None));
        }
    }
}
