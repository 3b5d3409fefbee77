//! The acquire/renew decision, free of I/O and of the system clock: every
//! instant and timestamp comes in as an argument.

use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

use crate::{LeaderElectionConfig, LeaseRecord};

/// What a candidate last saw of the Lease, and when it first saw it by its
/// own clock (client-go's `observedRecord` and `observedTime`).
///
/// Expiry is judged from `at`, never from the record's `renewTime`: clocks of
/// different machines may disagree, but each measures its own intervals well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The record as last read (or written) by this candidate.
    pub record: LeaseRecord,
    /// When this candidate first saw `record`.
    pub at: Instant,
}

impl Observed {
    /// Folds a freshly read record into the previous observation: the
    /// observation time moves only when the record changed.
    pub fn update(previous: Option<Self>, current: LeaseRecord, now: Instant) -> Self {
        match previous {
            Some(previous) if previous.record == current => previous,
            _ => Self {
                record: current,
                at: now,
            },
        }
    }

    /// When the Lease expires, by this candidate's clock, unless it changes.
    pub fn expires_at(&self) -> Instant {
        let seconds = u64::try_from(self.record.lease_duration_seconds).unwrap_or(0);
        self.at + Duration::from_secs(seconds)
    }

    /// When a candidate other than the holder may take the Lease: at once if
    /// nobody holds it, else at expiry.
    pub fn takeover_at(&self) -> Instant {
        match self.record.holder() {
            None => self.at,
            Some(_) => self.expires_at(),
        }
    }
}

/// What a candidate should write to the Lease, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Take the Lease: create it when absent, else update it with the
    /// `resourceVersion` just read, so that of two candidates taking it in
    /// the same round one gets 409 Conflict.
    Acquire(LeaseRecord),
    /// This candidate holds the Lease: write a new `renewTime`, keeping
    /// `acquireTime` and `leaseTransitions`.
    Renew(LeaseRecord),
    /// Another candidate holds the Lease and it has not expired.
    Wait {
        /// The current holder.
        holder: String,
        /// When the Lease expires by this candidate's clock, if it does not
        /// change before.
        expires_at: Instant,
    },
}

/// Decides what `config.identity` writes, given the Lease as observed
/// (`None` when it does not exist), at `now` by the candidate's clock;
/// `wall_now` only fills the record's timestamps.
///
/// The rules are client-go's `tryAcquireOrRenew`:
///
/// - absent Lease: acquire it, zero transitions;
/// - held by this identity (even if expired, say after a restart): renew,
///   keeping `acquireTime` and `leaseTransitions`;
/// - unheld (released), or held by another and expired at `now`: acquire,
///   `leaseTransitions` + 1;
/// - held by another and not expired: wait.
pub fn decide(
    current: Option<&Observed>,
    config: &LeaderElectionConfig,
    now: Instant,
    wall_now: Timestamp,
) -> Decision {
    let fresh = LeaseRecord {
        holder_identity: config.identity.clone(),
        lease_duration_seconds: config.lease_duration_seconds(),
        acquire_time: Some(wall_now),
        renew_time: Some(wall_now),
        lease_transitions: 0,
    };
    let Some(current) = current else {
        return Decision::Acquire(fresh);
    };
    match current.record.holder() {
        Some(holder) if holder == config.identity => Decision::Renew(LeaseRecord {
            acquire_time: current.record.acquire_time.or(Some(wall_now)),
            lease_transitions: current.record.lease_transitions,
            ..fresh
        }),
        Some(holder) if now < current.expires_at() => Decision::Wait {
            holder: holder.to_owned(),
            expires_at: current.expires_at(),
        },
        _ => Decision::Acquire(LeaseRecord {
            lease_transitions: current.record.lease_transitions.saturating_add(1),
            ..fresh
        }),
    }
}

/// The record that gives the Lease up (client-go's `ReleaseOnCancel`): no
/// holder, a one-second duration, both timestamps now, transitions kept.
/// `None` when `identity` does not hold `current`, which is then left alone.
pub fn released(current: &LeaseRecord, identity: &str, wall_now: Timestamp) -> Option<LeaseRecord> {
    (current.holder() == Some(identity)).then(|| LeaseRecord {
        holder_identity: String::new(),
        lease_duration_seconds: 1,
        acquire_time: Some(wall_now),
        renew_time: Some(wall_now),
        lease_transitions: current.lease_transitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = LeaderElectionConfig::DEFAULT_LEASE_DURATION;

    fn config(identity: &str) -> LeaderElectionConfig {
        LeaderElectionConfig::new("ccm", "kube-system", identity)
    }

    fn wall(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn held_by(holder: &str, transitions: i32) -> LeaseRecord {
        LeaseRecord {
            holder_identity: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: Some(wall(0)),
            renew_time: Some(wall(5)),
            lease_transitions: transitions,
        }
    }

    fn seen(record: LeaseRecord, at: Instant) -> Observed {
        Observed { record, at }
    }

    #[test]
    fn acquires_absent_lease_with_zero_transitions() {
        let decision = decide(None, &config("a"), Instant::now(), wall(100));
        assert_eq!(
            decision,
            Decision::Acquire(LeaseRecord {
                holder_identity: "a".into(),
                lease_duration_seconds: 15,
                acquire_time: Some(wall(100)),
                renew_time: Some(wall(100)),
                lease_transitions: 0,
            })
        );
    }

    #[test]
    fn waits_while_another_holds_a_fresh_lease() {
        let t0 = Instant::now();
        let observed = seen(held_by("b", 2), t0);
        let just_before_expiry = t0 + LEASE - Duration::from_millis(1);
        let decision = decide(Some(&observed), &config("a"), just_before_expiry, wall(100));
        assert_eq!(
            decision,
            Decision::Wait {
                holder: "b".into(),
                expires_at: t0 + LEASE
            }
        );
    }

    #[test]
    fn acquires_expired_lease_and_counts_the_transition() {
        let t0 = Instant::now();
        let observed = seen(held_by("b", 2), t0);
        let decision = decide(Some(&observed), &config("a"), t0 + LEASE, wall(100));
        assert_eq!(
            decision,
            Decision::Acquire(LeaseRecord {
                holder_identity: "a".into(),
                lease_duration_seconds: 15,
                acquire_time: Some(wall(100)),
                renew_time: Some(wall(100)),
                lease_transitions: 3,
            })
        );
    }

    #[test]
    fn expiry_uses_the_records_duration_not_the_candidates() {
        let t0 = Instant::now();
        let mut record = held_by("b", 0);
        record.lease_duration_seconds = 60;
        let observed = seen(record, t0);
        let decision = decide(Some(&observed), &config("a"), t0 + LEASE, wall(100));
        assert!(matches!(decision, Decision::Wait { .. }), "{decision:?}");
    }

    #[test]
    fn renewal_keeps_acquire_time_and_transitions() {
        let t0 = Instant::now();
        let observed = seen(held_by("a", 4), t0);
        let decision = decide(
            Some(&observed),
            &config("a"),
            t0 + Duration::from_secs(2),
            wall(100),
        );
        assert_eq!(
            decision,
            Decision::Renew(LeaseRecord {
                holder_identity: "a".into(),
                lease_duration_seconds: 15,
                acquire_time: Some(wall(0)),
                renew_time: Some(wall(100)),
                lease_transitions: 4,
            })
        );
    }

    #[test]
    fn own_lease_is_renewed_even_when_expired() {
        // A restarted process with the same identity resumes, as in client-go.
        let t0 = Instant::now();
        let observed = seen(held_by("a", 4), t0);
        let decision = decide(Some(&observed), &config("a"), t0 + 2 * LEASE, wall(100));
        assert!(matches!(decision, Decision::Renew(_)), "{decision:?}");
    }

    #[test]
    fn released_lease_is_acquired_at_once() {
        let t0 = Instant::now();
        let release = released(&held_by("b", 2), "b", wall(50)).unwrap();
        let observed = seen(release, t0);
        assert_eq!(observed.takeover_at(), t0);
        let Decision::Acquire(record) = decide(Some(&observed), &config("a"), t0, wall(51)) else {
            panic!("a released Lease must be acquired at once");
        };
        assert_eq!(record.holder_identity, "a");
        assert_eq!(record.lease_transitions, 3);
        assert_eq!(record.acquire_time, Some(wall(51)));
    }

    #[test]
    fn expiry_counts_from_when_the_change_was_seen_not_from_renew_time() {
        let t0 = Instant::now();
        let first = Observed::update(None, held_by("b", 0), t0);
        // The same record read 20 s later: not a change, so it has expired.
        let unchanged =
            Observed::update(Some(first), held_by("b", 0), t0 + Duration::from_secs(20));
        assert_eq!(unchanged.at, t0);
        let decision = decide(
            Some(&unchanged),
            &config("a"),
            t0 + Duration::from_secs(20),
            wall(20),
        );
        assert!(matches!(decision, Decision::Acquire(_)), "{decision:?}");

        // A renewal (new renewTime, however far in the past its value) restarts the clock.
        let mut renewed = held_by("b", 0);
        renewed.renew_time = Some(wall(-3_600));
        let t1 = t0 + Duration::from_secs(20);
        let changed = Observed::update(Some(unchanged), renewed, t1);
        assert_eq!(changed.at, t1);
        let decision = decide(
            Some(&changed),
            &config("a"),
            t1 + Duration::from_secs(1),
            wall(21),
        );
        assert!(matches!(decision, Decision::Wait { .. }), "{decision:?}");
    }

    #[test]
    fn release_clears_holder_and_keeps_transitions() {
        let release = released(&held_by("a", 7), "a", wall(9)).unwrap();
        assert_eq!(
            release,
            LeaseRecord {
                holder_identity: String::new(),
                lease_duration_seconds: 1,
                acquire_time: Some(wall(9)),
                renew_time: Some(wall(9)),
                lease_transitions: 7,
            }
        );
    }

    #[test]
    fn release_leaves_another_holders_lease_alone() {
        assert_eq!(released(&held_by("b", 7), "a", wall(9)), None);
        assert_eq!(released(&LeaseRecord::default(), "a", wall(9)), None);
    }

    /// One candidate of the simulation: what it last saw of the Lease, and
    /// until when it may act (the fence: its last successful write's time
    /// plus the renew deadline).
    #[derive(Default)]
    struct Candidate {
        observed: Option<Observed>,
        leads_until: Option<Instant>,
    }

    proptest::proptest! {
        /// Two or three candidates share one Lease; at each step one of them
        /// (chosen by the test) reads it, decides and writes, after some time
        /// passed. However they interleave, no two ever hold a valid term
        /// at once: the fence of one has lapsed before another acquires.
        #[test]
        fn no_two_candidates_ever_lead_at_once(
            count in 2_usize..4,
            steps in proptest::collection::vec((0_usize..3, 0_u64..20_000), 1..120),
        ) {
            let start = Instant::now();
            let mut now = start;
            let configs: Vec<LeaderElectionConfig> =
                (0..count).map(|c| config(&format!("c{c}"))).collect();
            let mut candidates: Vec<Candidate> = (0..count).map(|_| Candidate::default()).collect();
            let mut lease: Option<LeaseRecord> = None;
            for (who, advance_ms) in steps {
                let who = who % count;
                now += Duration::from_millis(advance_ms);
                let wall_now = wall(0)
                    .checked_add(jiff::SignedDuration::try_from(now - start).unwrap())
                    .unwrap();
                let candidate = &mut candidates[who];
                let observed = lease
                    .clone()
                    .map(|record| Observed::update(candidate.observed.take(), record, now));
                candidate.observed = observed.clone();
                match decide(observed.as_ref(), &configs[who], now, wall_now) {
                    Decision::Acquire(record) | Decision::Renew(record) => {
                        candidate.leads_until = Some(now + configs[who].renew_deadline);
                        candidate.observed = Some(Observed { record: record.clone(), at: now });
                        lease = Some(record);
                    }
                    Decision::Wait { .. } => {}
                }
                let leading: Vec<usize> = candidates
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.leads_until.is_some_and(|until| now < until))
                    .map(|(i, _)| i)
                    .collect();
                proptest::prop_assert!(leading.len() <= 1, "{leading:?} lead at once");
            }
        }
    }
}
