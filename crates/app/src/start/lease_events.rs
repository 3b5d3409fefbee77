//! The Events client-go's leader election records on its Lease, which
//! upstream's CCMs therefore record too: `<identity> became leader` when
//! this process starts leading and `<identity> stopped leading` when it
//! stops, Normal, reason `LeaderElection`, so that `kubectl describe lease`
//! and `kubectl get events` show each handover.

use std::time::Duration;

use ccm_leader_election::LeaderHandle;
use ccm_runtime::Events;
use k8s_openapi::api::core::v1::ObjectReference;

/// The component upstream's controller manager records these Events as.
const COMPONENT: &str = "cloud-controller-manager";
/// The longest recording one may take: the process may be stopping.
const WITHIN: Duration = Duration::from_secs(2);

/// Records the Lease's leadership Events for this process.
#[derive(Debug, Clone)]
pub(super) struct LeaseEvents {
    events: Events,
    lease: ObjectReference,
    identity: String,
}

impl LeaseEvents {
    /// For Lease `namespace/name`, as held by `leader`.
    pub(super) fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        leader: &LeaderHandle,
        identity: &str,
    ) -> Self {
        Self {
            events: Events::new(client, COMPONENT, Some(identity.to_owned())),
            lease: ObjectReference {
                api_version: Some("coordination.k8s.io/v1".into()),
                kind: Some("Lease".into()),
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                uid: leader.lease_uid(),
                ..ObjectReference::default()
            },
            identity: identity.to_owned(),
        }
    }

    /// `<identity> became leader`.
    pub(super) async fn became_leader(&self) {
        self.record("became leader").await;
    }

    /// `<identity> stopped leading`.
    pub(super) async fn stopped_leading(&self) {
        self.record("stopped leading").await;
    }

    async fn record(&self, what: &str) {
        let note = format!("{} {what}", self.identity);
        if tokio::time::timeout(
            WITHIN,
            self.events.normal(&self.lease, "LeaderElection", note),
        )
        .await
        .is_err()
        {
            tracing::debug!(what, "the leader election Event was not recorded in time");
        }
    }
}
