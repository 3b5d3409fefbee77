//! What the controller remembers about each Service between reconciles, and
//! the decision that memory drives: which provider call, if any, a Service
//! needs now.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use ccm_runtime::Retry;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use kube::ResourceExt;
use tokio::time::Instant;

use super::health::HealthWatch;
use super::spec;

/// The longest the runtime waits before retrying a failed reconcile.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// `namespace/name` of a Service.
pub(crate) fn key_of(service: &Service) -> String {
    format!(
        "{}/{}",
        service.namespace().unwrap_or_default(),
        service.name_any()
    )
}

/// The last successful ensure or update of a Service's load balancer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Synced {
    /// [`spec::fingerprint`] of the Service the provider saw.
    pub(crate) service: u64,
    /// [`super::eligible::NodeSet::identity`] of the nodes it was given.
    pub(crate) nodes: u64,
    /// The ingress the provider reported.
    pub(crate) ingress: Vec<LoadBalancerIngress>,
    /// The Service's annotations then, for telling which annotations that
    /// cannot change on an existing load balancer changed since.
    pub(crate) annotations: BTreeMap<String, String>,
}

/// Why a Service is left alone until it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parked {
    /// The provider said another controller implements it.
    ImplementedElsewhere,
    /// The provider refused its input (already reported by a Warning event).
    Refused,
}

/// A failed attempt and when the runtime retries it at the latest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Failure {
    /// When it failed.
    pub(crate) at: Instant,
    /// What the runtime does about it.
    pub(crate) retry: Retry,
    /// Failures in a row, this one included.
    pub(crate) count: u32,
}

impl Failure {
    /// Whether the runtime should have retried by `now`: only then does a
    /// periodic pass step in (a safety net that never shortens a backoff).
    fn overdue(&self, now: Instant) -> bool {
        match self.retry {
            Retry::Backoff => now >= self.at + MAX_BACKOFF,
            Retry::After(delay) => now >= self.at + delay,
            Retry::AwaitChange => false,
        }
    }
}

/// What the controller remembers about one Service.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Record {
    /// The Service's UID: a re-created Service starts afresh.
    pub(crate) uid: String,
    /// The last success.
    pub(crate) synced: Option<Synced>,
    /// The fingerprint it is parked at, and why.
    pub(crate) parked: Option<(u64, Parked)>,
    /// The last attempt, when it failed.
    pub(crate) failure: Option<Failure>,
    /// The next attempt must ensure, not merely update: the last update
    /// failed, and the load balancer may be gone.
    pub(crate) ensure_next: bool,
    /// Resource versions this controller wrote over: when one of them
    /// reaches a reconcile, the cache is behind our own writes and the
    /// newer version is on its way.
    pub(crate) superseded: Vec<String>,
    /// The fingerprint the Service had when the provider confirmed its load
    /// balancer deleted: a cleanup retried for a failed write at the same
    /// fingerprint (nothing has ensured since) goes straight to the writes.
    pub(crate) deleted: Option<u64>,
    /// When to ask the cloud for its targets' health.
    pub(crate) health: HealthWatch,
    /// The version this controller wrote to report the last failure in the
    /// Service's conditions: its own watch event is no reason to retry
    /// before the backoff ends.
    pub(crate) failure_report: Option<String>,
}

/// What a Service needs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Not ours: no load balancer wanted, no finalizer of ours.
    LeaveAlone,
    /// Delete its load balancer, clear its status, drop the finalizer.
    Cleanup,
    /// The load balancer is current; the status may need rewriting.
    UpToDate,
    /// Only the node set changed: point the load balancer at the new nodes.
    UpdateHosts,
    /// Create or bring up to date; `check_owner` first asks the provider,
    /// read-only, whether another controller implements it.
    Ensure {
        /// Ask `get_load_balancer` before adding the finalizer.
        check_owner: bool,
    },
}

impl Next {
    /// Whether this step calls the provider.
    pub(crate) fn calls_provider(self) -> bool {
        matches!(
            self,
            Self::Cleanup | Self::UpdateHosts | Self::Ensure { .. }
        )
    }
}

/// Decides what `service` needs, given what is remembered about it, its
/// current fingerprint and the identity of the eligible node set.
pub(crate) fn decide(
    service: &Service,
    record: Option<&Record>,
    fingerprint: u64,
    nodes: u64,
) -> Next {
    if spec::needs_cleanup(service) {
        return Next::Cleanup;
    }
    if !spec::wants_load_balancer(service) || spec::is_deleting(service) {
        return Next::LeaveAlone;
    }
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let record = record.filter(|r| r.uid == uid);
    let has_finalizer = spec::has_finalizer(service);
    let Some(record) = record else {
        return Next::Ensure {
            check_owner: !has_finalizer,
        };
    };
    if record.parked.is_some_and(|(at, _)| at == fingerprint) {
        return Next::UpToDate;
    }
    match &record.synced {
        Some(synced) if synced.service == fingerprint && has_finalizer && !record.ensure_next => {
            if synced.nodes == nodes {
                Next::UpToDate
            } else {
                Next::UpdateHosts
            }
        }
        // Once synced, the load balancer is ours: no need to ask again.
        Some(_) => Next::Ensure { check_owner: false },
        None => Next::Ensure {
            check_owner: !has_finalizer,
        },
    }
}

/// How long the UID of a deleted Service is remembered: far longer than a
/// reconcile handed its last version can take to start.
pub(crate) const GONE_KEPT: Duration = Duration::from_secs(300);

/// Every Service's record, by `namespace/name`, and the UIDs of Services
/// deleted in the last [`GONE_KEPT`].
#[derive(Debug, Default)]
pub(crate) struct Records {
    by_key: HashMap<String, Record>,
    gone: HashMap<String, Instant>,
}

impl Records {
    /// The record of `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<&Record> {
        self.by_key.get(key)
    }

    /// The record of `service`, created or reset (new UID) as needed.
    pub(crate) fn entry(&mut self, service: &Service) -> &mut Record {
        let uid = service.metadata.uid.clone().unwrap_or_default();
        let record = self.by_key.entry(key_of(service)).or_default();
        if record.uid != uid {
            *record = Record {
                uid,
                ..Record::default()
            };
        }
        record
    }

    /// The keys of Services whose target health is watched: asked before
    /// and could be told.
    pub(crate) fn health_watched(&self) -> Vec<String> {
        self.by_key
            .iter()
            .filter(|(_, r)| r.health.watched())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// How long until the next health ask for `key`, if one is due.
    pub(crate) fn health_wait(&self, key: &str, now: Instant) -> Option<Duration> {
        self.by_key.get(key).and_then(|r| r.health.next(now))
    }

    /// Forgets `key`.
    pub(crate) fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// `service` was deleted (its watch event came): its record goes, and
    /// its UID is kept for [`GONE_KEPT`], so that a reconcile already handed
    /// its last version (still holding the finalizer) does not take it for
    /// a Service whose load balancer was never deleted and delete it again.
    pub(crate) fn deleted(&mut self, service: &Service, now: Instant) {
        self.by_key.remove(&key_of(service));
        self.gone
            .retain(|_, at| now.saturating_duration_since(*at) < GONE_KEPT);
        if let Some(uid) = &service.metadata.uid {
            self.gone.insert(uid.clone(), now);
        }
    }

    /// Whether `service` is a version of a Service already deleted.
    pub(crate) fn is_gone(&self, service: &Service) -> bool {
        service
            .metadata
            .uid
            .as_ref()
            .is_some_and(|uid| self.gone.contains_key(uid))
    }

    /// The last attempt for `key` succeeded.
    pub(crate) fn succeeded(&mut self, key: &str) {
        if let Some(record) = self.by_key.get_mut(key) {
            record.failure = None;
            record.failure_report = None;
        }
    }

    /// Whether the provider already confirmed the load balancer of
    /// `service`, at `fingerprint`, deleted.
    pub(crate) fn deleted_at(&self, service: &Service, fingerprint: u64) -> bool {
        self.of(service)
            .is_some_and(|r| r.deleted == Some(fingerprint))
    }

    /// The record of `service` itself: none for an earlier Service of the
    /// same name (another UID).
    fn of(&self, service: &Service) -> Option<&Record> {
        self.by_key
            .get(&key_of(service))
            .filter(|r| r.uid == service.metadata.uid.as_deref().unwrap_or_default())
    }

    /// How long until the retry of the last failure, when `service` is
    /// the version this controller wrote to report that failure (nothing
    /// else changed since) and the retry is still ahead.
    pub(crate) fn reported_failure_wait(
        &self,
        service: &Service,
        now: Instant,
    ) -> Option<Duration> {
        let record = self.of(service)?;
        let failure = record.failure?;
        if record.failure_report.as_ref() != service.metadata.resource_version.as_ref() {
            return None;
        }
        let wait = match failure.retry {
            Retry::Backoff => ccm_runtime::controller_delay(failure.count),
            Retry::After(delay) => delay,
            // Parked: the decision itself calls no provider.
            Retry::AwaitChange => return None,
        };
        Some((failure.at + wait).saturating_duration_since(now)).filter(|w| !w.is_zero())
    }

    /// Whether `service` is a version this controller already wrote over.
    pub(crate) fn is_superseded(&self, service: &Service) -> bool {
        let Some(rv) = service.metadata.resource_version.as_ref() else {
            return false;
        };
        self.of(service).is_some_and(|r| r.superseded.contains(rv))
    }

    /// Whether a periodic pass should hand `service` to the controller: it
    /// needs a provider call and no retry of an earlier failure is pending.
    pub(crate) fn due(
        &self,
        service: &Service,
        fingerprint: u64,
        nodes: u64,
        now: Instant,
    ) -> bool {
        if self.is_superseded(service) || self.is_gone(service) {
            return false;
        }
        let record = self.by_key.get(&key_of(service));
        if !decide(service, record, fingerprint, nodes).calls_provider() {
            return false;
        }
        record
            .and_then(|r| r.failure)
            .is_none_or(|f| f.overdue(now))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;
    use crate::service::spec::CLEANUP_FINALIZER;

    fn service(finalizer: bool) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                finalizers: finalizer.then(|| vec![CLEANUP_FINALIZER.to_owned()]),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn synced(service: u64, nodes: u64) -> Record {
        Record {
            uid: "u1".into(),
            synced: Some(Synced {
                service,
                nodes,
                ingress: Vec::new(),
                annotations: BTreeMap::new(),
            }),
            ..Record::default()
        }
    }

    #[test]
    fn a_new_service_is_checked_for_another_owner_only_without_our_finalizer() {
        assert_eq!(
            decide(&service(false), None, 1, 1),
            Next::Ensure { check_owner: true }
        );
        assert_eq!(
            decide(&service(true), None, 1, 1),
            Next::Ensure { check_owner: false }
        );
    }

    #[test]
    fn an_unchanged_service_needs_nothing_and_a_new_node_set_only_an_update() {
        let record = synced(1, 10);
        assert_eq!(decide(&service(true), Some(&record), 1, 10), Next::UpToDate);
        assert_eq!(
            decide(&service(true), Some(&record), 1, 11),
            Next::UpdateHosts
        );
        assert_eq!(
            decide(&service(true), Some(&record), 2, 11),
            Next::Ensure { check_owner: false }
        );
    }

    #[test]
    fn a_failed_update_is_retried_as_an_ensure() {
        let record = Record {
            ensure_next: true,
            ..synced(1, 10)
        };
        assert_eq!(
            decide(&service(true), Some(&record), 1, 11),
            Next::Ensure { check_owner: false }
        );
    }

    #[test]
    fn a_lost_finalizer_is_restored_by_an_ensure() {
        assert_eq!(
            decide(&service(false), Some(&synced(1, 10)), 1, 10),
            Next::Ensure { check_owner: false }
        );
    }

    #[test]
    fn a_parked_service_waits_for_its_fingerprint_to_change() {
        let record = Record {
            uid: "u1".into(),
            parked: Some((1, Parked::ImplementedElsewhere)),
            ..Record::default()
        };
        assert_eq!(
            decide(&service(false), Some(&record), 1, 10),
            Next::UpToDate
        );
        assert_eq!(
            decide(&service(false), Some(&record), 2, 10),
            Next::Ensure { check_owner: true }
        );
    }

    #[test]
    fn a_record_of_an_earlier_service_with_the_same_name_is_ignored() {
        let mut record = synced(1, 10);
        record.uid = "old".into();
        assert_eq!(
            decide(&service(true), Some(&record), 1, 10),
            Next::Ensure { check_owner: false }
        );
    }

    #[test]
    fn cleanup_and_leaving_alone() {
        let mut deleting = service(true);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(decide(&deleting, Some(&synced(1, 1)), 1, 1), Next::Cleanup);
        deleting.metadata.finalizers = None;
        assert_eq!(decide(&deleting, None, 1, 1), Next::LeaveAlone);
        let mut cluster_ip = service(false);
        cluster_ip.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        assert_eq!(decide(&cluster_ip, None, 1, 1), Next::LeaveAlone);
    }

    #[tokio::test(start_paused = true)]
    async fn passes_never_cut_a_pending_retry_short() {
        let svc = service(true);
        let mut records = Records::default();
        *records.entry(&svc) = synced(1, 10);
        assert!(!records.due(&svc, 1, 10, Instant::now()), "up to date");
        assert!(records.due(&svc, 1, 11, Instant::now()), "new node set");

        records.entry(&svc).failure = Some(Failure {
            at: Instant::now(),
            retry: Retry::Backoff,
            count: 1,
        });
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(
            !records.due(&svc, 1, 11, Instant::now()),
            "the runtime's backoff retry is still pending"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            records.due(&svc, 1, 11, Instant::now()),
            "past the longest backoff: the pass steps in"
        );

        records.entry(&svc).failure = Some(Failure {
            at: Instant::now(),
            retry: Retry::After(Duration::from_secs(7)),
            count: 1,
        });
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(!records.due(&svc, 1, 11, Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(records.due(&svc, 1, 11, Instant::now()));
    }

    #[test]
    fn versions_we_wrote_over_are_superseded_and_not_due() {
        let mut svc = service(true);
        svc.metadata.resource_version = Some("5".into());
        let mut records = Records::default();
        records.entry(&svc).superseded = vec!["5".into(), "6".into()];
        assert!(records.is_superseded(&svc));
        assert!(
            !records.due(&svc, 1, 1, Instant::now()),
            "a newer version is on its way"
        );
        svc.metadata.resource_version = Some("7".into());
        assert!(!records.is_superseded(&svc));
        assert!(records.due(&svc, 1, 1, Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_version_of_a_deleted_service_needs_nothing() {
        let mut deleting = service(true);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let mut records = Records::default();
        *records.entry(&deleting) = synced(1, 1);
        records.entry(&deleting).deleted = Some(1);
        assert!(
            records.due(&deleting, 1, 1, Instant::now()),
            "its finalizer is still on"
        );
        assert!(!records.is_gone(&deleting));

        records.deleted(&deleting, Instant::now());
        assert!(records.get("default/web").is_none(), "the record went");
        assert!(
            records.is_gone(&deleting),
            "a reconcile handed this version must not delete its load balancer again"
        );
        assert!(!records.due(&deleting, 1, 1, Instant::now()));
        let mut recreated = service(true);
        recreated.metadata.uid = Some("u2".into());
        assert!(
            !records.is_gone(&recreated),
            "a new Service of the same name"
        );

        tokio::time::advance(GONE_KEPT).await;
        records.deleted(&recreated, Instant::now());
        assert!(!records.is_gone(&deleting), "kept no longer than GONE_KEPT");
        assert!(records.is_gone(&recreated));
    }

    #[test]
    fn a_new_uid_resets_the_record() {
        let svc = service(true);
        let mut records = Records::default();
        *records.entry(&svc) = synced(1, 10);
        let mut recreated = svc.clone();
        recreated.metadata.uid = Some("u2".into());
        assert_eq!(records.entry(&recreated).synced, None);
    }

    proptest::proptest! {
        /// The provider is called exactly when something it reads changed
        /// since the last success: the Service's fingerprint (an ensure) or
        /// only the eligible nodes (an update), and never after a failed
        /// update until an ensure; a Service without our finalizer, or one
        /// whose record belongs to an earlier Service of the same name, is
        /// ensured.
        #[test]
        fn the_provider_is_called_exactly_when_what_it_reads_changed(
            synced_service in proptest::prelude::any::<u64>(),
            synced_nodes in proptest::prelude::any::<u64>(),
            fingerprint in proptest::prelude::any::<u64>(),
            nodes in proptest::prelude::any::<u64>(),
            same_service in proptest::prelude::any::<bool>(),
            same_nodes in proptest::prelude::any::<bool>(),
            ensure_next in proptest::prelude::any::<bool>(),
            finalizer in proptest::prelude::any::<bool>(),
            recreated in proptest::prelude::any::<bool>(),
        ) {
            let fingerprint = if same_service { synced_service } else { fingerprint };
            let nodes = if same_nodes { synced_nodes } else { nodes };
            let mut record = synced(synced_service, synced_nodes);
            record.ensure_next = ensure_next;
            if recreated {
                record.uid = "an-earlier-service".into();
            }
            let next = decide(&service(finalizer), Some(&record), fingerprint, nodes);
            let expected = if recreated {
                Next::Ensure { check_owner: !finalizer }
            } else if fingerprint != synced_service || !finalizer || ensure_next {
                Next::Ensure { check_owner: false }
            } else if nodes != synced_nodes {
                Next::UpdateHosts
            } else {
                Next::UpToDate
            };
            proptest::prop_assert_eq!(next, expected);
        }
    }
}
