//! `--dry-run` against moto: the provider describes each request to the
//! request fence as it leaves. Reads are sent; each change is planned, not
//! sent, and the ensure goes on past it (a resource it would create stands
//! under a planned identifier), so the plan is the whole change. An ensure
//! made afterwards makes exactly the planned changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use ccm_cloud_provider::CloudProvider;
use ccm_cloud_provider::fence::scope;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::dry_run::{Described, DryRun};
use ccm_provider_aws::test_util::{CLUSTER, classic_service};

use super::fixture::{Fixture, UID, mutations, service};

/// Whether `detail` has a port argument (`Port=80`, `IpPermissions.1.FromPort=80`)
/// of `port`.
fn names_port(detail: &str, port: i32) -> bool {
    let port = port.to_string();
    detail.split(' ').any(|word| {
        word.split_once('=')
            .is_some_and(|(key, value)| key.ends_with("Port") && value == port)
    })
}

/// Upstream's `request` label of `operation`, as the provider's metrics
/// count it: `CreateTargetGroup` is `create_target_group`.
fn label(operation: &str) -> String {
    let mut out = String::new();
    for (i, c) in operation.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Plans `svc`'s ensure in a dry run, checking that moto is unchanged;
/// then ensures it, checking that the calls that changed AWS are the
/// planned ones, as many of each. Answers the plan.
async fn planned_then_made(f: &Fixture, svc: &Service, nodes: &[Arc<Node>]) -> Vec<Described> {
    let untouched = f.moto.state().await;
    let fence = Arc::new(DryRun::default());
    scope(
        fence.clone(),
        f.lb().ensure_load_balancer(CLUSTER, svc, nodes),
    )
    .await
    .expect("a dry run plans past each change");
    assert_eq!(f.moto.state().await, untouched, "nothing was sent");
    let plan = fence.planned();

    let before = mutations(f.provider.as_ref());
    f.lb()
        .ensure_load_balancer(CLUSTER, svc, nodes)
        .await
        .expect("ensured");
    let made = made_since(&before, f.provider.as_ref());
    assert_eq!(
        made,
        counted(&plan),
        "the ensure made what was planned: {plan:#?}"
    );
    plan
}

/// The calls that changed AWS since the counts `before`, by label.
fn made_since(
    before: &BTreeMap<String, u64>,
    provider: &dyn CloudProvider,
) -> BTreeMap<String, u64> {
    mutations(provider)
        .into_iter()
        .map(|(request, n)| {
            let earlier = before.get(&request).copied().unwrap_or(0);
            (request, n - earlier)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The planned requests, counted by label.
fn counted(plan: &[Described]) -> BTreeMap<String, u64> {
    let mut planned = BTreeMap::new();
    for p in plan {
        *planned.entry(label(&p.operation)).or_default() += 1;
    }
    planned
}

fn operations(plan: &[Described]) -> Vec<&str> {
    plan.iter().map(|p| p.operation.as_str()).collect()
}

#[tokio::test]
async fn a_new_nlb_is_planned_from_its_own_group_to_its_node_rules() {
    let f = Fixture::with_global(2, "NLBSecurityGroupMode = Managed").await;
    let nodes = f.nodes(&[0, 1]);
    let plan = planned_then_made(&f, &service(&[], &[(80, 30080)]), &nodes).await;
    let ops = operations(&plan);
    // Each create is planned after what it needs.
    let order: Vec<Option<usize>> = [
        "CreateSecurityGroup",
        "CreateLoadBalancer",
        "CreateTargetGroup",
        "RegisterTargets",
        "CreateListener",
    ]
    .iter()
    .map(|operation| ops.iter().position(|o| o == operation))
    .collect();
    assert!(
        order.iter().all(Option::is_some) && order.is_sorted(),
        "{ops:?}"
    );
    let lb = plan
        .iter()
        .find(|p| p.operation == "CreateLoadBalancer")
        .expect("planned");
    assert!(
        lb.detail
            .contains("SecurityGroups.1=planned:security-group/"),
        "the new load balancer is planned with its planned group: {lb:#?}"
    );
    assert!(
        plan.iter()
            .any(|p| p.operation == "CreateListener" && names_port(&p.detail, 80)),
        "{plan:#?}"
    );
    assert!(
        plan.iter()
            .filter(|p| p.operation == "AuthorizeSecurityGroupIngress")
            .any(|p| names_port(&p.detail, 30080)),
        "the node rule for the node port is planned: {plan:#?}"
    );
}

#[tokio::test]
async fn a_dry_run_ensure_in_shape_plans_nothing_and_a_port_change_plans_all_of_it() {
    let f = Fixture::with_global(2, "NLBSecurityGroupMode = Managed").await;
    let nodes = f.nodes(&[0, 1]);
    let svc = service(&[], &[(80, 30080)]);
    let ensured = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .expect("ensured");

    // In shape: the dry run reads, plans nothing, and answers as an ensure.
    let fence = Arc::new(DryRun::default());
    let again = scope(
        fence.clone(),
        f.lb().ensure_load_balancer(CLUSTER, &svc, &nodes),
    )
    .await
    .expect("nothing to change");
    assert_eq!(fence.planned(), [], "no mutation");
    assert_eq!(again, ensured);
    let reads = fence.reads();
    assert!(
        reads.iter().any(|r| r.operation == "DescribeLoadBalancers"),
        "reads are described and sent: {reads:?}"
    );

    // Port 80 becomes 8080: the group's rule, the listener and its target
    // group move, and the plan holds each change.
    let moved = service(&[], &[(8080, 30080)]);
    let plan = planned_then_made(&f, &moved, &nodes).await;
    let ops = operations(&plan);
    for operation in [
        "AuthorizeSecurityGroupIngress",
        "RevokeSecurityGroupIngress",
        "CreateTargetGroup",
        "CreateListener",
        "DeleteListener",
        "DeleteTargetGroup",
    ] {
        assert!(ops.contains(&operation), "{operation}: {plan:#?}");
    }
    let by = |operation: &str| plan.iter().find(|p| p.operation == operation);
    assert!(by("CreateListener").is_some_and(|p| names_port(&p.detail, 8080)));
    assert!(by("AuthorizeSecurityGroupIngress").is_some_and(|p| names_port(&p.detail, 8080)));
    assert!(by("RevokeSecurityGroupIngress").is_some_and(|p| names_port(&p.detail, 80)));
}

#[tokio::test]
async fn a_deletion_is_planned_in_full_once_each() {
    let f = Fixture::with_global(2, "NLBSecurityGroupMode = Managed").await;
    let nodes = f.nodes(&[0, 1]);
    let svc = service(&[], &[(80, 30080), (443, 30443)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .expect("ensured");

    // moto's new load balancer turns active when first described.
    assert_eq!(f.load_balancers().await.len(), 1);
    let untouched = f.moto.state().await;
    let fence = Arc::new(DryRun::default());
    scope(
        fence.clone(),
        f.lb().ensure_load_balancer_deleted(CLUSTER, &svc),
    )
    .await
    .expect("a dry run plans past each change");
    assert_eq!(f.moto.state().await, untouched, "nothing was sent");
    let plan = fence.planned();
    let mut seen = std::collections::BTreeSet::new();
    for p in &plan {
        assert!(
            seen.insert((&p.operation, &p.detail)),
            "planned once: {p:#?}"
        );
    }
    let groups = plan
        .iter()
        .filter(|p| p.operation == "DeleteTargetGroup")
        .count();
    assert_eq!(groups, 2, "{plan:#?}");
    for operation in [
        "DeleteLoadBalancer",
        "RevokeSecurityGroupIngress",
        "DeleteSecurityGroup",
    ] {
        assert!(
            operations(&plan).contains(&operation),
            "{operation}: {plan:#?}"
        );
    }

    let before = mutations(f.provider.as_ref());
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    let made = made_since(&before, f.provider.as_ref());
    assert_eq!(made, counted(&plan), "the deletion made what was planned");
}

#[tokio::test]
async fn a_new_classic_elb_is_planned_in_full() {
    let f = Fixture::new(2).await;
    let nodes = f.nodes(&[0, 1]);
    let svc = classic_service(UID, &[], &[(80, 30080)]);
    let plan = planned_then_made(&f, &svc, &nodes).await;
    let ops = operations(&plan);
    for operation in [
        "CreateSecurityGroup",
        "CreateLoadBalancer",
        "ConfigureHealthCheck",
        "RegisterInstancesWithLoadBalancer",
    ] {
        assert!(ops.contains(&operation), "{operation}: {plan:#?}");
    }
    assert!(
        plan.iter()
            .filter(|p| p.operation == "RegisterInstancesWithLoadBalancer")
            .all(|p| p
                .detail
                .contains("LoadBalancerName=a6c1f0e2a1b2c4d3e8f4a5b6c7d8e9f0")),
        "{plan:#?}"
    );
}

/// The SSL negotiation policy is planned for the listeners the planned
/// listener changes leave, not for those the ELB has now.
#[tokio::test]
async fn a_moved_tls_port_of_a_classic_elb_plans_its_policy_on_the_new_listener() {
    let f = Fixture::new(2).await;
    let nodes = f.nodes(&[0, 1]);
    let cert = f.moto.certificate("shop.example.com").await;
    let tls = |port: i32| {
        let ssl_ports = port.to_string();
        let annotations = [
            (key::SSL_CERT, cert.as_str()),
            (key::SSL_PORTS, ssl_ports.as_str()),
            (key::BACKEND_PROTOCOL, "https"),
            (
                key::SSL_NEGOTIATION_POLICY,
                "ELBSecurityPolicy-TLS-1-2-2017-01",
            ),
        ];
        classic_service(UID, &annotations, &[(port, 30443)])
    };
    f.lb()
        .ensure_load_balancer(CLUSTER, &tls(443), &nodes)
        .await
        .expect("ensured");

    let plan = planned_then_made(&f, &tls(8443), &nodes).await;
    let policies: Vec<&Described> = plan
        .iter()
        .filter(|p| p.operation == "SetLoadBalancerPoliciesOfListener")
        .collect();
    assert_eq!(policies.len(), 1, "{plan:#?}");
    assert!(names_port(&policies[0].detail, 8443), "{plan:#?}");
}
