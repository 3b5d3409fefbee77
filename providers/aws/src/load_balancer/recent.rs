//! What load-balancer ensures and updates read again and again, kept for a
//! while as upstream keeps it: the target instances (upstream's
//! `instanceCache`, `describeAllInstancesCached`: reused while under 10
//! minutes old and holding every instance asked for) and each VPC's CIDR
//! blocks (upstream reads none; they change only when an operator
//! associates a block).
//!
//! # Guarantees
//! - A snapshot is served only when it is younger than [`MAX_AGE`] and
//!   holds every instance ID asked for; otherwise the caller describes
//!   them and the answer replaces the snapshot.
//! - Nodes known only by name (no `spec.providerID` yet) are never served
//!   from here.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_ec2::types::Instance;
use ccm_cloud_provider::ipnet::IpNet;
use parking_lot::Mutex;
use tokio::time::Instant;

/// How long a snapshot is reused: upstream's `defaultEC2InstanceCacheMaxAge`.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(600);

/// Instances by ID, and when they were described.
#[derive(Debug, Default)]
struct Snapshot {
    at: Option<Instant>,
    by_id: HashMap<String, Instance>,
}

#[derive(Debug, Default)]
pub(crate) struct Recent {
    targets: Mutex<Snapshot>,
    vpc_cidrs: Mutex<HashMap<String, (Instant, Vec<IpNet>)>>,
}

impl Recent {
    /// The instances `ids`, each `None` when AWS did not know it, when the
    /// snapshot is fresh and holds them all.
    pub(crate) fn instances(&self, ids: &[&str]) -> Option<Vec<Instance>> {
        let snapshot = self.targets.lock();
        let fresh = snapshot.at.is_some_and(|at| at.elapsed() < MAX_AGE);
        if !fresh {
            return None;
        }
        ids.iter()
            .map(|id| snapshot.by_id.get(*id).cloned())
            .collect()
    }

    /// Replaces the snapshot with instances just described.
    pub(crate) fn remember_instances(&self, instances: impl IntoIterator<Item = Instance>) {
        let by_id = instances
            .into_iter()
            .filter_map(|i| Some((i.instance_id()?.to_owned(), i)))
            .collect();
        *self.targets.lock() = Snapshot {
            at: Some(Instant::now()),
            by_id,
        };
    }

    /// The VPC's CIDR blocks, when read under [`MAX_AGE`] ago.
    pub(crate) fn vpc_cidrs(&self, vpc_id: &str) -> Option<Vec<IpNet>> {
        self.vpc_cidrs
            .lock()
            .get(vpc_id)
            .filter(|(at, _)| at.elapsed() < MAX_AGE)
            .map(|(_, cidrs)| cidrs.clone())
    }

    pub(crate) fn remember_vpc_cidrs(&self, vpc_id: &str, cidrs: &[IpNet]) {
        self.vpc_cidrs
            .lock()
            .insert(vpc_id.to_owned(), (Instant::now(), cidrs.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str) -> Instance {
        Instance::builder().instance_id(id).build()
    }

    #[tokio::test(start_paused = true)]
    async fn a_snapshot_serves_what_it_holds_until_it_is_ten_minutes_old() {
        let recent = Recent::default();
        assert!(recent.instances(&["i-1"]).is_none(), "empty");
        recent.remember_instances([instance("i-1"), instance("i-2")]);
        let served = recent.instances(&["i-2", "i-1"]).expect("both held");
        assert_eq!(served[0].instance_id(), Some("i-2"));
        assert!(
            recent.instances(&["i-1", "i-3"]).is_none(),
            "i-3 is not held"
        );
        tokio::time::advance(MAX_AGE).await;
        assert!(recent.instances(&["i-1"]).is_none(), "too old");
        recent.remember_instances([instance("i-3")]);
        assert!(recent.instances(&["i-1"]).is_none(), "replaced, not merged");
        assert!(recent.instances(&["i-3"]).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn vpc_cidrs_are_kept_per_vpc_for_ten_minutes() {
        let recent = Recent::default();
        let cidrs: Vec<IpNet> = vec!["10.0.0.0/16".parse().expect("a CIDR")];
        recent.remember_vpc_cidrs("vpc-1", &cidrs);
        assert_eq!(recent.vpc_cidrs("vpc-1"), Some(cidrs));
        assert_eq!(recent.vpc_cidrs("vpc-2"), None);
        tokio::time::advance(MAX_AGE).await;
        assert_eq!(recent.vpc_cidrs("vpc-1"), None);
    }
}
