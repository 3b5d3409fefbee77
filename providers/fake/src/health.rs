//! The fake cloud's target health: what its instances' states say (a
//! running instance passes the health check, a stopped or terminated one
//! fails it as AWS reports, `Target.InvalidState`; with auto instances a
//! node without one passes), unless a test set a
//! node's health outright.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{CloudError, LoadBalancer, LoadBalancerHealth, TargetHealth, TargetState};

use crate::load_balancer::{service_key, validate};
use crate::state::State;
use crate::{FakeCloud, InstanceState, Operation};

/// What a target on `node` says; with `auto` instances, a node with no
/// instance has a running one.
fn state_of(state: &State, node: &str, auto: bool) -> TargetState {
    if let Some(set) = state.target_health.get(node) {
        return set.clone();
    }
    match state.instances.get(node).map(|i| i.state) {
        Some(InstanceState::Running) => TargetState::Healthy,
        Some(InstanceState::Stopped | InstanceState::Terminated) => TargetState::Unhealthy {
            reason: "Target.InvalidState".into(),
        },
        None if auto => TargetState::Healthy,
        None => TargetState::Unhealthy {
            reason: "Target.NotRegistered".into(),
        },
    }
}

impl FakeCloud {
    /// Sets what the cloud's health check says of `node`'s targets; `None`
    /// goes back to what its instance's state says.
    pub fn set_target_health(&self, node: &str, health: Option<TargetState>) {
        let mut state = self.state();
        match health {
            Some(health) => state.target_health.insert(node.to_owned(), health),
            None => state.target_health.remove(node),
        };
    }

    /// The health of the targets of `service`'s load balancer: one per node
    /// it sends traffic to; no targets when it has no load balancer.
    pub(crate) async fn health_of(
        &self,
        cluster_name: &str,
        service: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        self.enter(
            Operation::LoadBalancerHealth,
            vec![service_key(service)],
            None,
        )
        .await?;
        validate(service)?;
        let name = self.load_balancer_name(cluster_name, service);
        let auto = self.inner.settings.lock().auto_instances;
        let state = self.state();
        let targets = state
            .load_balancers
            .get(&name)
            .map(|lb| {
                lb.nodes
                    .iter()
                    .map(|node| TargetHealth::new(node.clone(), state_of(&state, node, auto)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(LoadBalancerHealth { targets }))
    }
}
