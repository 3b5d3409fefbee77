//! Whether a CCM leads while `audit --delete` runs. The audit deletes from
//! a snapshot without the Lease; a leader that adopts or recreates a
//! resource meanwhile would lose it. So `--delete` is refused while the
//! Lease is held and renewed, unless `--force` says to go on anyway.

use std::time::Duration;

use ccm_leader_election::LeaseRecord;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

/// A leader holding the Lease: who, and how long ago it renewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leader {
    pub(crate) holder: String,
    pub(crate) renewed_ago: Duration,
}

/// The leader `record` names at wall-clock time `now`: held, and renewed
/// less than its lease duration ago (a renew time in the future, from a
/// clock ahead of ours, counts as just renewed). A record without a renew
/// time but with a holder counts as held: the audit errs towards refusing.
pub(crate) fn active(record: &LeaseRecord, now: Timestamp) -> Option<Leader> {
    let holder = record.holder()?.to_owned();
    let duration = Duration::from_secs(u64::try_from(record.lease_duration_seconds).unwrap_or(0));
    let renewed_ago = match record.renew_time {
        Some(renewed) => now
            .duration_since(renewed)
            .try_into()
            .unwrap_or(Duration::ZERO),
        None => Duration::ZERO,
    };
    (renewed_ago < duration || record.renew_time.is_none()).then_some(Leader {
        holder,
        renewed_ago,
    })
}

/// The leader of the Lease `namespace/name`, read now; none when the Lease
/// does not exist.
///
/// # Errors
/// When the Lease cannot be read (other than not found).
pub(crate) async fn leader(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Leader>, kube::Error> {
    let lease = Api::<Lease>::namespaced(client, namespace)
        .get_opt(name)
        .await?;
    Ok(lease.and_then(|lease| {
        active(
            &LeaseRecord::from_spec(lease.spec.as_ref()),
            Timestamp::now(),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, renewed: Option<i64>) -> LeaseRecord {
        LeaseRecord {
            holder_identity: holder.into(),
            lease_duration_seconds: 15,
            renew_time: renewed.map(|s| Timestamp::from_second(s).expect("a time")),
            ..LeaseRecord::default()
        }
    }

    #[test]
    fn a_lease_leads_while_held_and_renewed_within_its_duration() {
        let now = Timestamp::from_second(1_000).expect("a time");
        assert_eq!(
            active(&record("ccm-0", Some(990)), now),
            Some(Leader {
                holder: "ccm-0".into(),
                renewed_ago: Duration::from_secs(10)
            })
        );
        assert_eq!(active(&record("ccm-0", Some(985)), now), None, "expired");
        assert_eq!(active(&record("", Some(999)), now), None, "released");
        assert!(
            active(&record("ccm-0", Some(1_005)), now).is_some(),
            "a clock ahead of ours"
        );
        assert!(
            active(&record("ccm-0", None), now).is_some(),
            "held, never renewed"
        );
    }
}
