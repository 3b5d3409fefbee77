//! The health of a load balancer's droplets, as far as DigitalOcean's API
//! tells it.
//!
//! DigitalOcean's load balancer object (API v2, `load_balancer` schema)
//! carries no per-droplet health: only the load balancer's `status` (`new`,
//! `active` or `errored`) and its `droplet_ids`. The control panel shows
//! each droplet's health-check state, the API does not. So every droplet of
//! a load balancer shares its load balancer's state:
//!
//! | `status`  | each droplet                                  |
//! |-----------|-----------------------------------------------|
//! | `new`     | [`TargetState::Initial`]                      |
//! | `active`  | [`TargetState::Healthy`]                      |
//! | `errored` | [`TargetState::Unhealthy`], reason `errored`  |
//!
//! `Healthy` therefore means "assigned to an active load balancer", not
//! "passing its health check": a droplet whose node port does not answer
//! still reads healthy.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{LoadBalancerHealth, TargetHealth, TargetState};

use super::{STATUS_ACTIVE, STATUS_NEW};
use crate::api::types::LoadBalancer;
use crate::provider_id::droplet_id_from_provider_id;

const STATUS_ERRORED: &str = "errored";

/// How long a load balancer an ensure or update just saw answers the health
/// read that follows it.
const FRESH_FOR: Duration = Duration::from_secs(30);

/// The load balancer each Service's last ensure or update saw, by Service
/// UID: the service controller reads health right after each change, and
/// that read is answered from what the change itself just read or wrote,
/// with no call. Taken once; later reads (while not all healthy) GET.
#[derive(Debug, Default)]
pub(crate) struct Seen(parking_lot::Mutex<HashMap<String, (Instant, LoadBalancer)>>);

impl Seen {
    /// The Service `uid`'s load balancer is `lb`, as of now.
    pub(crate) fn remember(&self, uid: &str, lb: LoadBalancer) {
        let mut seen = self.0.lock();
        let now = Instant::now();
        seen.retain(|_, (at, _)| now.duration_since(*at) < FRESH_FOR);
        seen.insert(uid.to_owned(), (now, lb));
    }

    /// What was seen of the Service `uid`'s load balancer, if fresh; gone
    /// once taken.
    pub(crate) fn take_fresh(&self, uid: &str) -> Option<LoadBalancer> {
        let (at, lb) = self.0.lock().remove(uid)?;
        (at.elapsed() < FRESH_FOR).then_some(lb)
    }
}

/// What `lb` says of its droplets, each named by the node in `nodes` whose
/// `spec.providerID` is `digitalocean://<droplet-id>`.
///
/// A droplet no node names (not yet a node, or a node without a provider
/// ID) is left out: a target is reported by node name, and naming it would
/// take a droplet listing.
pub(super) fn of(lb: &LoadBalancer, nodes: &[Arc<Node>]) -> LoadBalancerHealth {
    let node_by_droplet: HashMap<u64, &str> = nodes
        .iter()
        .filter_map(|node| {
            let name = node.metadata.name.as_deref()?;
            let provider_id = node.spec.as_ref()?.provider_id.as_deref()?;
            Some((droplet_id_from_provider_id(provider_id)?, name))
        })
        .collect();
    let state = state_of(&lb.status);
    LoadBalancerHealth {
        targets: lb
            .droplet_ids
            .iter()
            .filter_map(|id| node_by_droplet.get(id))
            .map(|node| TargetHealth::new(*node, state.clone()))
            .collect(),
    }
}

/// Every droplet's state on a load balancer in `status`.
fn state_of(status: &str) -> TargetState {
    match status {
        STATUS_ACTIVE => TargetState::Healthy,
        // An absent status is read as `new`, as the ensure does.
        STATUS_NEW | "" => TargetState::Initial,
        STATUS_ERRORED => TargetState::Unhealthy {
            reason: STATUS_ERRORED.to_owned(),
        },
        // Not in the spec's enum: not known to be serving.
        other => TargetState::Unhealthy {
            reason: other.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use ccm_cloud_provider::k8s_openapi::api::core::v1::NodeSpec;
    use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str, provider_id: Option<&str>) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_owned),
                ..NodeSpec::default()
            }),
            status: None,
        })
    }

    fn lb(status: &str, droplet_ids: &[u64]) -> LoadBalancer {
        serde_json::from_value(serde_json::json!({
            "id": "4de7ac8b-495b-4884-9a69-1050c6793cd6",
            "name": "a1",
            "status": status,
            "droplet_ids": droplet_ids,
        }))
        .unwrap()
    }

    #[test]
    fn what_a_change_saw_answers_one_read_while_fresh() {
        let seen = Seen::default();
        assert!(seen.take_fresh("u1").is_none());
        seen.remember("u1", lb("active", &[11]));
        assert_eq!(
            seen.take_fresh("u1").map(|lb| lb.status),
            Some("active".to_owned())
        );
        assert!(seen.take_fresh("u1").is_none(), "taken once");
        seen.remember("u2", lb("new", &[11]));
        seen.0.lock().get_mut("u2").unwrap().0 -= FRESH_FOR;
        assert!(seen.take_fresh("u2").is_none(), "stale");
    }

    #[test]
    fn each_droplet_named_by_a_node_shares_the_load_balancers_state() {
        let nodes = [
            node("node-a", Some("digitalocean://11")),
            node("node-b", Some("digitalocean://12")),
            node("node-c", None),
            node("node-d", Some("digitalocean://14")),
        ];
        let cases = [
            ("new", TargetState::Initial),
            ("", TargetState::Initial),
            ("active", TargetState::Healthy),
            (
                "errored",
                TargetState::Unhealthy {
                    reason: "errored".into(),
                },
            ),
            (
                "deleting",
                TargetState::Unhealthy {
                    reason: "deleting".into(),
                },
            ),
        ];
        for (status, state) in cases {
            // 13 is node-c's droplet, which has no provider ID; 99 is no node.
            let health = of(&lb(status, &[11, 12, 13, 99]), &nodes);
            assert_eq!(
                health.targets,
                vec![
                    TargetHealth::new("node-a", state.clone()),
                    TargetHealth::new("node-b", state),
                ],
                "{status:?}"
            );
        }
    }

    #[test]
    fn a_load_balancer_without_droplets_has_no_targets() {
        let nodes = [node("node-a", Some("digitalocean://11"))];
        assert_eq!(
            of(&lb("active", &[]), &nodes),
            LoadBalancerHealth::default()
        );
    }
}
