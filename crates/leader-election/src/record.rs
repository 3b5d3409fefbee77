//! [`LeaseRecord`]: the fields of a Lease leader election reads and
//! writes, converted to and from the API's Lease.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The fields of a Lease's spec that leader election reads and writes
/// (client-go's `LeaderElectionRecord`).
///
/// Timestamps are informational: candidates never compare them with their own
/// clock, only notice that the record changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `holderIdentity`; empty when nobody holds the Lease (never held, or
    /// released).
    pub holder_identity: String,
    /// `leaseDurationSeconds`: how long others wait after seeing a change.
    pub lease_duration_seconds: i32,
    /// `acquireTime`: when the current holder took the Lease.
    pub acquire_time: Option<Timestamp>,
    /// `renewTime`: when the holder last renewed.
    pub renew_time: Option<Timestamp>,
    /// `leaseTransitions`: how many times the holder changed.
    pub lease_transitions: i32,
}

impl LeaseRecord {
    /// Reads the record from a Lease's spec; a missing spec or field reads as
    /// empty or zero, as in client-go.
    pub fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let Some(spec) = spec else {
            return Self::default();
        };
        Self {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.as_ref().map(|time| time.0),
            renew_time: spec.renew_time.as_ref().map(|time| time.0),
            lease_transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes the record into `spec`, leaving the fields leader election does
    /// not own (`preferredHolder`, `strategy`) as they were.
    pub fn apply_to(&self, spec: &mut LeaseSpec) {
        spec.holder_identity = Some(self.holder_identity.clone());
        spec.lease_duration_seconds = Some(self.lease_duration_seconds);
        spec.acquire_time = self.acquire_time.map(MicroTime);
        spec.renew_time = self.renew_time.map(MicroTime);
        spec.lease_transitions = Some(self.lease_transitions);
    }

    /// The holder, or `None` when the Lease is unheld.
    pub fn holder(&self) -> Option<&str> {
        Some(self.holder_identity.as_str()).filter(|holder| !holder.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_and_keeps_unowned_fields() {
        let record = LeaseRecord {
            holder_identity: "node-a".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(Timestamp::from_second(1_000).unwrap()),
            renew_time: Some(Timestamp::from_second(1_010).unwrap()),
            lease_transitions: 3,
        };
        let mut spec = LeaseSpec {
            preferred_holder: Some("node-b".into()),
            ..LeaseSpec::default()
        };
        record.apply_to(&mut spec);
        assert_eq!(LeaseRecord::from_spec(Some(&spec)), record);
        assert_eq!(spec.preferred_holder.as_deref(), Some("node-b"));
    }

    #[test]
    fn missing_spec_reads_as_unheld() {
        let record = LeaseRecord::from_spec(None);
        assert_eq!(record.holder(), None);
        assert_eq!(record.lease_duration_seconds, 0);
        let empty_holder = LeaseRecord::from_spec(Some(&LeaseSpec {
            holder_identity: Some(String::new()),
            ..LeaseSpec::default()
        }));
        assert_eq!(empty_holder.holder(), None);
    }
}
