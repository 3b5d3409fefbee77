//! `load_balancer_health` against moto: every target named by its node,
//! once per target group, as moto's health checks see it (registered and
//! running: `healthy` / `InService`; stopped: `unused` for
//! `Target.InvalidState` / `OutOfService` without a reason), and what it
//! costs.

use std::collections::BTreeMap;

use ccm_cloud_provider::{LoadBalancerHealth, TargetHealth, TargetState, health_by_node};
use ccm_provider_aws::test_util::{CLUSTER, ec2};

use super::fixture::*;

impl Fixture {
    async fn health(
        &self,
        svc: &ccm_cloud_provider::k8s_openapi::api::core::v1::Service,
        nodes: &[usize],
    ) -> LoadBalancerHealth {
        self.lb()
            .load_balancer_health(CLUSTER, svc, &self.nodes(nodes))
            .await
            .expect("answered")
            .expect("AWS can tell")
    }

    /// The node name of seeded instance `i`.
    fn node_name(&self, i: usize) -> String {
        self.estate.instances[i].private_dns_name.clone()
    }

    async fn stop(&self, i: usize) {
        ec2(&self.moto)
            .stop_instances()
            .instance_ids(&self.estate.instances[i].id)
            .send()
            .await
            .expect("stopped");
    }
}

/// Each target as `(node, state)`, sorted.
fn sorted(health: &LoadBalancerHealth) -> Vec<(String, TargetState)> {
    let mut targets: Vec<(String, TargetState)> = health
        .targets
        .iter()
        .map(|t| (t.node.clone(), t.state.clone()))
        .collect();
    targets.sort_by(|a, b| a.0.cmp(&b.0));
    targets
}

/// The calls made between `before` and `after`, by upstream's label.
fn made(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

#[tokio::test]
async fn an_nlb_reports_each_node_by_name_once_per_port_and_a_stopped_instance_unhealthy() {
    let f = Fixture::new(3).await;
    let svc = service(&[], &[(80, 30080), (443, 30443)]);
    assert_eq!(
        f.health(&svc, &[0, 1]).await,
        LoadBalancerHealth::default(),
        "no load balancer yet: no targets"
    );
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let (a, b) = (f.node_name(0), f.node_name(1));

    let before = calls(f.provider.as_ref());
    let health = f.health(&svc, &[0, 1]).await;
    assert_eq!(
        made(&before, &calls(f.provider.as_ref())),
        counts(&[
            ("describe_load_balancers", 1),
            ("describe_target_groups", 1),
            ("describe_target_health", 2),
        ])
    );
    let mut want = vec![
        (a.clone(), TargetState::Healthy),
        (a.clone(), TargetState::Healthy),
        (b.clone(), TargetState::Healthy),
        (b.clone(), TargetState::Healthy),
    ];
    want.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(sorted(&health), want, "one target per node and port");

    f.stop(1).await;
    let health = f.health(&svc, &[0, 1]).await;
    let stopped = TargetState::Unhealthy {
        reason: "Target.InvalidState".into(),
    };
    let mut by_node = vec![
        TargetHealth::new(a, TargetState::Healthy),
        TargetHealth::new(b.clone(), stopped),
    ];
    by_node.sort_by(|x, y| x.node.cmp(&y.node));
    assert_eq!(health_by_node(&health), by_node);
    assert_eq!(
        health.targets.iter().filter(|t| t.node == b).count(),
        2,
        "reported by each target group"
    );
}

#[tokio::test]
async fn a_classic_elb_reports_its_instances_by_node_name_from_one_call() {
    let f = Fixture::new(3).await;
    let svc = ccm_provider_aws::test_util::classic_service(UID, &[], &[(80, 30080)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let (a, b) = (f.node_name(0), f.node_name(1));

    let before = calls(f.provider.as_ref());
    let health = f.health(&svc, &[0, 1]).await;
    assert_eq!(
        made(&before, &calls(f.provider.as_ref())),
        counts(&[("describe_instance_health", 1)])
    );
    let mut want = vec![
        (a.clone(), TargetState::Healthy),
        (b.clone(), TargetState::Healthy),
    ];
    want.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(sorted(&health), want);

    f.stop(1).await;
    let mut want = vec![
        (a, TargetState::Healthy),
        (
            b,
            TargetState::Unhealthy {
                reason: "OutOfService".into(),
            },
        ),
    ];
    want.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(sorted(&f.health(&svc, &[0, 1]).await), want);
}
