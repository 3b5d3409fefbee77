//! `--dry-run` against moto: the provider describes each request to the
//! request fence as it leaves, so an ensure that would change nothing
//! succeeds in a dry run, and one that would change something plans its
//! first mutation and sends none.

use std::sync::Arc;

use ccm_cloud_provider::fence::scope;
use ccm_provider_aws::test_util::CLUSTER;
use ccm_provider_aws::test_util::dry_run::DryRun;

use super::fixture::{Fixture, service};

/// Whether `detail` has a port argument (`Port=80`, `IpPermissions.1.FromPort=80`)
/// of `port`.
fn names_port(detail: &str, port: i32) -> bool {
    let port = port.to_string();
    detail.split(' ').any(|word| {
        word.split_once('=')
            .is_some_and(|(key, value)| key.ends_with("Port") && value == port)
    })
}

#[tokio::test]
async fn a_dry_run_ensure_sends_no_mutation_and_plans_a_port_change_without_making_it() {
    // Managed: the first change is then the load balancer's own rule.
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

    // Port 80 becomes 8080: the first mutation is planned, not sent.
    let before = f.moto.state().await;
    let moved = service(&[], &[(8080, 30080)]);
    let fence = Arc::new(DryRun::default());
    let err = scope(
        fence.clone(),
        f.lb().ensure_load_balancer(CLUSTER, &moved, &nodes),
    )
    .await
    .unwrap_err();
    let planned = fence.planned();
    assert_eq!(
        planned.len(),
        1,
        "the ensure stops at its first mutation, unretried: {planned:?}"
    );
    assert!(
        names_port(&planned[0].detail, 80) || names_port(&planned[0].detail, 8080),
        "the plan names the port: {planned:?}"
    );
    assert_eq!(err.kind(), "retry", "the fence's answer, not AWS's: {err}");
    assert!(err.to_string().contains(&planned[0].operation), "{err}");
    assert_eq!(f.moto.state().await, before, "moto is unchanged");
}
