//! The health of a load balancer's targets, as the cloud's own health checks
//! see them: what [`LoadBalancer::load_balancer_health`](crate::LoadBalancer::load_balancer_health)
//! answers, and what the service controller turns into the Service's
//! `LoadBalancerTargetsHealthy` condition.

/// What the cloud says of one target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TargetState {
    /// The cloud's health check passes.
    Healthy,
    /// The cloud has not finished its first health checks (AWS `initial`,
    /// a target still registering): neither healthy nor unhealthy yet.
    Initial,
    /// The cloud's health check fails, or the target cannot take traffic.
    Unhealthy {
        /// The cloud's reason code, such as `Target.Timeout` or
        /// `Instance has failed at least the UnhealthyThreshold number of
        /// health checks consecutively.` shortened to a code; empty when the
        /// cloud gives none.
        reason: String,
    },
}

/// One target of a load balancer: a node the load balancer sends traffic to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetHealth {
    /// The node's name, as in `metadata.name`.
    pub node: String,
    /// What the cloud says of it.
    pub state: TargetState,
}

impl TargetHealth {
    /// A target of `node` in `state`.
    pub fn new(node: impl Into<String>, state: TargetState) -> Self {
        Self {
            node: node.into(),
            state,
        }
    }
}

/// The health of every target of one load balancer. A node the cloud
/// reports more than once (one target group per port) appears once per
/// report; the service controller counts a node healthy only when every
/// report of it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LoadBalancerHealth {
    /// The targets, in any order.
    pub targets: Vec<TargetHealth>,
}

/// The health of each node, worst report first: a node is unhealthy when any
/// report of it is, initial when any is and none is unhealthy, healthy
/// otherwise. Sorted by node name.
#[must_use]
pub fn health_by_node(health: &LoadBalancerHealth) -> Vec<TargetHealth> {
    let mut by_node: std::collections::BTreeMap<&str, &TargetState> =
        std::collections::BTreeMap::new();
    for target in &health.targets {
        let entry = by_node.entry(&target.node).or_insert(&target.state);
        if rank(&target.state) > rank(entry) {
            *entry = &target.state;
        }
    }
    by_node
        .into_iter()
        .map(|(node, state)| TargetHealth::new(node, state.clone()))
        .collect()
}

fn rank(state: &TargetState) -> u8 {
    match state {
        TargetState::Healthy => 0,
        TargetState::Initial => 1,
        TargetState::Unhealthy { .. } => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_as_healthy_as_its_worst_report() {
        let unhealthy = TargetState::Unhealthy {
            reason: "Target.Timeout".into(),
        };
        let health = LoadBalancerHealth {
            targets: vec![
                TargetHealth::new("b", TargetState::Healthy),
                TargetHealth::new("a", TargetState::Healthy),
                TargetHealth::new("b", unhealthy.clone()),
                TargetHealth::new("b", TargetState::Initial),
                TargetHealth::new("c", TargetState::Initial),
                TargetHealth::new("c", TargetState::Healthy),
            ],
        };
        assert_eq!(
            health_by_node(&health),
            vec![
                TargetHealth::new("a", TargetState::Healthy),
                TargetHealth::new("b", unhealthy),
                TargetHealth::new("c", TargetState::Initial),
            ]
        );
        assert!(health_by_node(&LoadBalancerHealth::default()).is_empty());
    }
}
