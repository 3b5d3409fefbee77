//! The node condition `NetworkUnavailable`, as upstream's route controller
//! sets it.

use std::collections::HashMap;
use std::time::Duration;

use ccm_runtime::WatchEvent;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The condition type.
pub(super) const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";

/// How long a written condition the cache has not shown yet is trusted:
/// past it, a cache that still disagrees is believed (someone else changed
/// the condition, or the watch missed our write).
const PENDING_TRUST: Duration = Duration::from_secs(60);

/// Condition writes in flight at once.
const WRITES_IN_FLIGHT: usize = 32;

/// What the route controller says about a node's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Network {
    /// Every route of the node exists: `False`, reason `RouteCreated`.
    RouteCreated,
    /// Some route of the node could not be created: `True`, reason
    /// `NoRouteCreated`.
    NoRouteCreated,
}

impl Network {
    fn status(self) -> &'static str {
        match self {
            Self::RouteCreated => "False",
            Self::NoRouteCreated => "True",
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Self::RouteCreated => "RouteCreated",
            Self::NoRouteCreated => "NoRouteCreated",
        }
    }

    /// Upstream's messages, which users match on.
    fn message(self) -> &'static str {
        match self {
            Self::RouteCreated => "RouteController created a route",
            Self::NoRouteCreated => "RouteController failed to create a route",
        }
    }

    /// Whether `node` already carries this state (upstream compares status
    /// and reason, so another writer's reason, such as a CNI's, is replaced).
    pub(super) fn is_set_on(self, node: &Node) -> bool {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == NETWORK_UNAVAILABLE))
            .is_some_and(|c| {
                c.status == self.status() && c.reason.as_deref() == Some(self.reason())
            })
    }

    /// A strategic-merge patch of `status.conditions`, whose merge key is
    /// `type`: it replaces this one condition and leaves the others — the
    /// kubelet's, written concurrently — as the server has them. (A merge
    /// patch would replace the whole list with our copy, undoing a heartbeat
    /// that landed since we read the node.) Both times are `now`, as
    /// upstream's `SetNodeCondition` sets them.
    pub(super) fn patch(self, now: jiff::Timestamp) -> Value {
        let condition = NodeCondition {
            type_: NETWORK_UNAVAILABLE.into(),
            status: self.status().into(),
            reason: Some(self.reason().into()),
            message: Some(self.message().into()),
            last_transition_time: Some(Time(now)),
            last_heartbeat_time: Some(Time(now)),
        };
        json!({ "status": { "conditions": [condition] } })
    }
}

/// Conditions this process wrote that the node cache has not shown yet, so
/// that a pass reading a lagging cache does not write them again.
#[derive(Debug, Default)]
pub(super) struct Pending {
    written: Mutex<HashMap<String, (Network, Instant)>>,
}

impl Pending {
    fn wrote(&self, node: &str, state: Network) {
        self.written
            .lock()
            .insert(node.to_owned(), (state, Instant::now()));
    }

    /// Whether `state` was written to `node` recently and may simply not be
    /// in the cache yet.
    fn in_flight(&self, node: &str, state: Network) -> bool {
        self.written
            .lock()
            .get(node)
            .is_some_and(|(wrote, at)| *wrote == state && at.elapsed() < PENDING_TRUST)
    }

    /// Forgets a write once the watch shows it (or the node is gone).
    pub(super) fn observe(&self, event: &WatchEvent<Node>) {
        let mut written = self.written.lock();
        if written.is_empty() {
            return;
        }
        match event {
            WatchEvent::Apply(node) | WatchEvent::InitApply(node) => {
                let name = node.name_any();
                if written
                    .get(&name)
                    .is_some_and(|(state, _)| state.is_set_on(node))
                {
                    written.remove(&name);
                }
            }
            WatchEvent::Delete(node) => {
                written.remove(&node.name_any());
            }
            WatchEvent::Init | WatchEvent::InitDone => {}
        }
    }
}

/// Writes `NetworkUnavailable` through `nodes/status`, only on change.
#[derive(Debug)]
pub(super) struct Conditions {
    api: Api<Node>,
    pending: std::sync::Arc<Pending>,
    slots: Semaphore,
}

impl Conditions {
    pub(super) fn new(api: Api<Node>, pending: std::sync::Arc<Pending>) -> Self {
        Self {
            api,
            pending,
            slots: Semaphore::new(WRITES_IN_FLIGHT),
        }
    }

    /// Sets `state` on `node` (the cached copy) unless it is already set.
    /// Returns whether it wrote.
    ///
    /// # Errors
    /// The API error; a node deleted meanwhile is not an error.
    pub(super) async fn ensure(&self, node: &Node, state: Network) -> Result<bool, kube::Error> {
        let name = node.name_any();
        if state.is_set_on(node) || self.pending.in_flight(&name, state) {
            return Ok(false);
        }
        let _slot = self.slots.acquire().await;
        let patch = state.patch(jiff::Timestamp::now());
        match self
            .api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                self.pending.wrote(&name, state);
                tracing::info!(node = %name, reason = state.reason(), "set {NETWORK_UNAVAILABLE}={}", state.status());
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(conditions: &[(&str, &str, &str)]) -> Node {
        let conditions = conditions
            .iter()
            .map(|(type_, status, reason)| NodeCondition {
                type_: (*type_).into(),
                status: (*status).into(),
                reason: Some((*reason).into()),
                ..NodeCondition::default()
            })
            .collect();
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(NodeStatus {
                conditions: Some(conditions),
                ..NodeStatus::default()
            }),
        }
    }

    #[test]
    fn state_matches_on_status_and_reason_like_upstream() {
        let created = node(&[
            ("Ready", "True", "KubeletReady"),
            (NETWORK_UNAVAILABLE, "False", "RouteCreated"),
        ]);
        assert!(Network::RouteCreated.is_set_on(&created));
        assert!(!Network::NoRouteCreated.is_set_on(&created));
        let cni = node(&[(NETWORK_UNAVAILABLE, "False", "CalicoIsUp")]);
        assert!(
            !Network::RouteCreated.is_set_on(&cni),
            "another writer's reason is replaced, as upstream does"
        );
        assert!(!Network::RouteCreated.is_set_on(&node(&[])));
        assert!(Network::NoRouteCreated.is_set_on(&node(&[(
            NETWORK_UNAVAILABLE,
            "True",
            "NoRouteCreated"
        )])));
    }

    #[test]
    fn patch_carries_only_this_condition_with_upstreams_wording() {
        let now: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        assert_eq!(
            Network::NoRouteCreated.patch(now),
            json!({ "status": { "conditions": [{
                "type": "NetworkUnavailable",
                "status": "True",
                "reason": "NoRouteCreated",
                "message": "RouteController failed to create a route",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
                "lastHeartbeatTime": "2026-01-02T03:04:05Z",
            }] } })
        );
        let created = Network::RouteCreated.patch(now);
        assert_eq!(created["status"]["conditions"][0]["status"], "False");
        assert_eq!(
            created["status"]["conditions"][0]["message"],
            "RouteController created a route"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_in_flight_until_the_watch_shows_it_or_it_is_old() {
        let pending = Pending::default();
        pending.wrote("n1", Network::RouteCreated);
        assert!(pending.in_flight("n1", Network::RouteCreated));
        assert!(
            !pending.in_flight("n1", Network::NoRouteCreated),
            "a different state is written at once"
        );

        pending.observe(&WatchEvent::Apply(node(&[(
            "Ready",
            "True",
            "KubeletReady",
        )])));
        assert!(
            pending.in_flight("n1", Network::RouteCreated),
            "a heartbeat is not our write"
        );
        pending.observe(&WatchEvent::Apply(node(&[(
            NETWORK_UNAVAILABLE,
            "False",
            "RouteCreated",
        )])));
        assert!(
            !pending.in_flight("n1", Network::RouteCreated),
            "seen: the cache is the truth again"
        );

        pending.wrote("n1", Network::RouteCreated);
        tokio::time::advance(PENDING_TRUST).await;
        assert!(
            !pending.in_flight("n1", Network::RouteCreated),
            "an unseen write is not trusted forever"
        );
    }
}
