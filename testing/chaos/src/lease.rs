//! The Lease's history, recorded by watching it, and what the suites judge
//! against it: who held it when, and whether every cloud mutation was made
//! by the holder inside its term.

use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::watcher;

use crate::cloud::Call;

/// The Lease the replicas elect with (the flags' defaults).
pub(crate) const LEASE_NAMESPACE: &str = "kube-system";
pub(crate) const LEASE_NAME: &str = "cloud-controller-manager";

/// One version of the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) holder: String,
    /// µs since the Unix epoch.
    pub(crate) acquired_us: i64,
    pub(crate) renewed_us: i64,
    pub(crate) duration_us: i64,
}

fn micros(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>) -> i64 {
    t.map_or(0, |t| t.0.as_microsecond())
}

fn record(lease: &Lease) -> Option<Record> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    Some(Record {
        holder,
        acquired_us: micros(spec.acquire_time.as_ref()),
        renewed_us: micros(spec.renew_time.as_ref()),
        duration_us: i64::from(spec.lease_duration_seconds.unwrap_or_default()) * 1_000_000,
    })
}

/// Every version of the Lease seen since [`Recorder::start`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorder {
    records: Arc<Mutex<Vec<Record>>>,
}

impl Recorder {
    /// Watches the Lease until the returned task is aborted.
    pub(crate) fn start(client: kube::Client) -> (Self, tokio::task::JoinHandle<()>) {
        let recorder = Self::default();
        let records = recorder.records.clone();
        let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
        let config = watcher::Config::default().fields(&format!("metadata.name={LEASE_NAME}"));
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(leases, config));
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) = event
                else {
                    continue;
                };
                if let Some(r) = record(&lease) {
                    let mut records = records.lock().unwrap_or_else(PoisonError::into_inner);
                    if records.last() != Some(&r) {
                        records.push(r);
                    }
                }
            }
        });
        (recorder, task)
    }

    /// The versions so far.
    pub(crate) fn records(&self) -> Vec<Record> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The newest holder, if any.
    pub(crate) fn holder(&self) -> Option<Record> {
        self.records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .cloned()
    }
}

/// One holder's uninterrupted tenure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Term {
    pub(crate) holder: String,
    pub(crate) start_us: i64,
    /// The last renewal plus the lease duration: when the term could have
    /// ended at the latest.
    pub(crate) valid_until_us: i64,
}

/// The terms in `records`, in order: a new term starts whenever the
/// holder or its acquire time changes.
pub(crate) fn terms(records: &[Record]) -> Vec<Term> {
    let mut terms: Vec<Term> = Vec::new();
    for r in records {
        let valid_until_us = r.renewed_us + r.duration_us;
        match terms.last_mut() {
            Some(t) if t.holder == r.holder && t.start_us == r.acquired_us => {
                t.valid_until_us = t.valid_until_us.max(valid_until_us);
            }
            _ => terms.push(Term {
                holder: r.holder.clone(),
                start_us: r.acquired_us,
                valid_until_us,
            }),
        }
    }
    terms
}

/// What the fencing check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fencing {
    /// Mutations judged.
    pub(crate) mutations: usize,
    /// Mutations made outside every term of their caller.
    pub(crate) unfenced: Vec<String>,
    /// Mutations made after another replica's term had begun.
    pub(crate) overlapping: Vec<String>,
}

/// Judges every applied mutation in `calls` (at the time it reached the
/// cloud) against `terms`.
pub(crate) fn judge(calls: &[Call], terms: &[Term]) -> Fencing {
    let mut fencing = Fencing::default();
    for call in calls.iter().filter(|c| c.applied) {
        fencing.mutations += 1;
        let t = call.started_us;
        let describe = || format!("{} by {} at {t}", call.op, call.caller);
        let Some(index) = terms
            .iter()
            .rposition(|term| term.holder == call.caller && term.start_us <= t)
        else {
            fencing
                .unfenced
                .push(format!("{}, before it ever led", describe()));
            continue;
        };
        let term = &terms[index];
        if t > term.valid_until_us {
            fencing.unfenced.push(format!(
                "{}, {} µs after its term (from {}) could have ended",
                describe(),
                t - term.valid_until_us,
                term.start_us,
            ));
        } else if terms[index + 1..]
            .iter()
            .any(|next| next.holder != call.caller && next.start_us <= t)
        {
            fencing.overlapping.push(describe());
        }
    }
    fencing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(holder: &str, acquired: i64, renewed: i64) -> Record {
        Record {
            holder: holder.into(),
            acquired_us: acquired,
            renewed_us: renewed,
            duration_us: 10,
        }
    }

    fn mutation(caller: &str, at: i64) -> Call {
        Call {
            caller: caller.into(),
            op: "create_route".into(),
            applied: true,
            started_us: at,
        }
    }

    #[test]
    fn renewals_extend_a_term_and_a_new_holder_starts_another() {
        let t = terms(&[
            rec("a", 0, 0),
            rec("a", 0, 5),
            rec("b", 20, 20),
            rec("a", 40, 40),
        ]);
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].start_us, t[0].valid_until_us), (0, 15));
        assert_eq!((t[1].holder.as_str(), t[1].start_us), ("b", 20));
        assert_eq!(t[2].start_us, 40);
    }

    #[test]
    fn mutations_inside_their_callers_term_pass() {
        let t = terms(&[rec("a", 0, 5), rec("b", 20, 25)]);
        let verdict = judge(
            &[mutation("a", 3), mutation("a", 15), mutation("b", 30)],
            &t,
        );
        assert_eq!(verdict.mutations, 3);
        assert!(verdict.unfenced.is_empty(), "{verdict:?}");
        assert!(verdict.overlapping.is_empty(), "{verdict:?}");
    }

    #[test]
    fn a_mutation_after_the_lease_lapsed_or_before_leading_is_unfenced() {
        let t = terms(&[rec("a", 10, 12), rec("b", 30, 30)]);
        let verdict = judge(
            &[mutation("a", 23), mutation("b", 5), mutation("c", 11)],
            &t,
        );
        assert_eq!(verdict.unfenced.len(), 3, "{verdict:?}");
    }

    #[test]
    fn a_mutation_after_another_replica_acquired_overlaps() {
        // a's lease is still valid at 19 by its own clock, but b acquired
        // at 18 (a lease shortened by a release, say).
        let t = terms(&[rec("a", 10, 12), rec("b", 18, 18)]);
        let verdict = judge(&[mutation("a", 19)], &t);
        assert_eq!(verdict.overlapping.len(), 1, "{verdict:?}");
        assert!(verdict.unfenced.is_empty());
    }

    #[test]
    fn calls_that_did_not_change_the_cloud_are_not_judged() {
        let mut read = mutation("nobody", 1);
        read.applied = false;
        assert_eq!(judge(&[read], &[]).mutations, 0);
    }
}
