//! `--dry-run` on what upstream made: a Service whose port no longer
//! matches the listener of the NLB upstream made for it is planned in
//! full, every create, change and delete with its arguments, and nothing
//! is sent; the ensure made afterwards makes exactly the planned calls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ccm_cloud_provider::fence::scope;
use ccm_provider_aws::test_util::dry_run::{Described, DryRun};
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed;
use ccm_provider_aws::test_util::{CLUSTER, Moto, elbv2, moto, nlb_service};

use super::upstream::{NODE_PORT, PORT, UID};
use super::{changes, default_nlb, provider};

/// The upstream NLB's listener and target group.
async fn listener_and_group(moto: &Moto) -> (String, String) {
    let elbv2 = elbv2(moto);
    let lbs = elbv2
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    let lb = lbs.load_balancers()[0]
        .load_balancer_arn()
        .expect("an ARN")
        .to_owned();
    let listeners = elbv2
        .describe_listeners()
        .load_balancer_arn(&lb)
        .send()
        .await
        .expect("described");
    let listener = &listeners.listeners()[0];
    let group = listener.default_actions()[0]
        .target_group_arn()
        .expect("forwards to a group");
    (
        listener.listener_arn().expect("an ARN").to_owned(),
        group.to_owned(),
    )
}

/// Whether `planned`'s arguments hold every one of `words`.
fn says(planned: &Described, words: &[&str]) -> bool {
    let args: Vec<&str> = planned.detail.split(' ').collect();
    words.iter().all(|w| args.contains(w))
}

#[tokio::test]
async fn a_dry_run_on_an_upstream_nlb_whose_listener_port_differs_plans_every_change() {
    let moto = moto().await;
    let estate = default_nlb(&moto).await;
    let (listener, group) = listener_and_group(&moto).await;
    let moved = PORT + 8000;
    let svc = nlb_service(UID, &[], &[(moved, NODE_PORT)]);
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider(&proxy, &estate, "").await;
    let lb = provider.load_balancer().expect("AWS has load balancers");
    let nodes: Vec<_> = estate.instances.iter().map(seed::Seeded::node).collect();

    let untouched = moto.state().await;
    let fence = Arc::new(DryRun::default());
    scope(
        fence.clone(),
        lb.ensure_load_balancer(CLUSTER, &svc, &nodes),
    )
    .await
    .expect("a dry run plans past each change");
    assert_eq!(moto.state().await, untouched, "nothing was sent");

    let plan = fence.planned();
    let operations: Vec<&str> = plan.iter().map(|p| p.operation.as_str()).collect();
    assert_eq!(
        operations,
        [
            "CreateTargetGroup",
            "RegisterTargets",
            "CreateListener",
            "DeleteListener",
            "DeleteTargetGroup",
        ],
        "the whole plan: {plan:#?}"
    );
    let new_group = plan[1]
        .detail
        .split(' ')
        .find_map(|w| w.strip_prefix("TargetGroupArn="))
        .expect("the targets go to a group");
    assert!(
        new_group.starts_with("planned:target-group/k8s-"),
        "the new group stands under its planned name: {plan:#?}"
    );
    let node_port = format!("Port={NODE_PORT}");
    let targets: BTreeSet<&str> = plan[1]
        .detail
        .split(' ')
        .filter_map(|w| w.split_once(".Id=").map(|(_, id)| id))
        .collect();
    let instances: BTreeSet<&str> = estate.instances.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(targets, instances, "every node is a target: {plan:#?}");
    let target_port = format!("Targets.1.Port={NODE_PORT}");
    let forward = format!("DefaultActions.1.TargetGroupArn={new_group}");
    let old_listener = format!("ListenerArn={listener}");
    let old_group = format!("TargetGroupArn={group}");
    let expected: [(&str, Vec<&str>); 5] = [
        (
            "CreateTargetGroup",
            vec![node_port.as_str(), "Protocol=TCP"],
        ),
        ("RegisterTargets", vec![target_port.as_str()]),
        ("CreateListener", vec!["Port=8080", forward.as_str()]),
        ("DeleteListener", vec![old_listener.as_str()]),
        ("DeleteTargetGroup", vec![old_group.as_str()]),
    ];
    for (planned, (operation, words)) in plan.iter().zip(&expected) {
        assert!(
            says(planned, words),
            "{operation} says {words:?}: {planned:#?}"
        );
    }

    // The ensure itself makes what was planned, and nothing else.
    let before = proxy.actions();
    lb.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .expect("ensured");
    let mut planned: BTreeMap<&str, u64> = BTreeMap::new();
    for operation in &operations {
        *planned.entry(operation).or_default() += 1;
    }
    let planned: Vec<String> = planned
        .iter()
        .map(|(operation, n)| format!("{operation} x{n}"))
        .collect();
    assert_eq!(changes(&before, &proxy.actions()), planned);
}
