//! A Service whose `aws-load-balancer-type` changes after its load balancer
//! exists keeps that load balancer, still reconciled, with a Warning; its
//! deletion leaves neither kind behind, also after a crash let both be
//! made.

use ccm_cloud_provider::EnsuredLoadBalancer;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    LoadBalancerStatus as ServiceLoadBalancer, Service, ServiceStatus,
};
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::CLUSTER;

use super::classic::registered;
use super::fixture::*;

/// `svc` with the status the service controller writes after `ensured`.
fn with_status(mut svc: Service, ensured: &EnsuredLoadBalancer) -> Service {
    let ingress = ensured
        .status
        .ingress
        .iter()
        .map(
            |i| ccm_cloud_provider::k8s_openapi::api::core::v1::LoadBalancerIngress {
                hostname: i.hostname.clone(),
                ip: i.ip.clone(),
                ..Default::default()
            },
        )
        .collect();
    svc.status = Some(ServiceStatus {
        load_balancer: Some(ServiceLoadBalancer {
            ingress: Some(ingress),
        }),
        ..ServiceStatus::default()
    });
    svc
}

/// `svc` with `annotations` set (or, for an empty value, removed).
fn annotated(mut svc: Service, annotations: &[(&str, &str)]) -> Service {
    let all = svc
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    for (k, v) in annotations {
        if v.is_empty() {
            all.remove(*k);
        } else {
            all.insert((*k).to_owned(), (*v).to_owned());
        }
    }
    svc
}

impl Fixture {
    /// `(classic ELBs, NLBs, target groups)` in moto.
    async fn kinds(&self) -> (usize, usize, usize) {
        (
            self.classic_elbs().await.len(),
            self.load_balancers().await.len(),
            self.target_groups().await.len(),
        )
    }
}

#[tokio::test]
async fn a_classic_elb_asked_to_become_an_nlb_is_kept_reconciled_and_then_deleted_whole() {
    let f = Fixture::new(3).await;
    let groups_before = f.security_group_ids().await;
    let node_rules_before = f.ingress(&f.estate.node_security_group).await;
    let svc = ccm_provider_aws::test_util::classic_service(UID, &[], &[(80, 30080)]);
    let ensured = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1, 2]))
        .await
        .expect("ensured");
    assert!(ensured.warnings.is_empty());
    let svc = with_status(svc, &ensured);
    let hostname = ensured.status.ingress[0].hostname.clone();

    // The operator asks for an NLB (with a key only an NLB reads).
    let changed = annotated(
        svc,
        &[
            (key::TYPE, "nlb"),
            (
                key::TARGET_GROUP_ATTRIBUTES,
                "deregistration_delay.timeout_seconds=30",
            ),
        ],
    );
    let before = mutations(&*f.provider);
    let again = f
        .lb()
        .ensure_load_balancer(CLUSTER, &changed, &f.nodes(&[0, 1, 2]))
        .await
        .expect("the classic ELB is still ensured");
    assert_eq!(mutations(&*f.provider), before, "nothing made or changed");
    assert_eq!(f.kinds().await, (1, 0, 0), "no NLB beside the classic ELB");
    assert_eq!(again.status.ingress[0].hostname, hostname);
    let reasons: Vec<&str> = again.warnings.iter().map(|w| w.reason.as_str()).collect();
    assert_eq!(reasons, ["LoadBalancerTypeUnchanged"]);
    let message = &again.warnings[0].message;
    for words in [
        "asks for a Network Load Balancer",
        "is a classic ELB",
        "kept and still reconciled",
        key::TARGET_GROUP_ATTRIBUTES,
        "create a new Service",
    ] {
        assert!(message.contains(words), "{words:?} in {message}");
    }

    // Still reconciled: nodes leave, instances are deregistered.
    f.lb()
        .update_load_balancer(CLUSTER, &changed, &f.nodes(&[0]))
        .await
        .expect("updated");
    assert_eq!(
        registered(&f.classic_elbs().await[0]),
        [f.estate.instances[0].id.clone()].into()
    );
    let status = f
        .lb()
        .get_load_balancer(CLUSTER, &changed)
        .await
        .expect("read");
    assert_eq!(status.expect("found").ingress[0].hostname, hostname);

    // Deleted while it asks for an NLB: the classic ELB and its group go.
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &changed)
        .await
        .expect("deleted");
    assert_eq!(f.kinds().await, (0, 0, 0));
    assert_eq!(f.security_group_ids().await, groups_before);
    assert_eq!(
        f.ingress(&f.estate.node_security_group).await,
        node_rules_before
    );
}

#[tokio::test]
async fn an_nlb_asked_to_become_a_classic_elb_is_kept_and_then_deleted_whole() {
    let f = Fixture::with_global(2, "NLBSecurityGroupMode = Managed").await;
    let groups_before = f.security_group_ids().await;
    let node_rules_before = f.ingress(&f.estate.node_security_group).await;
    let svc = service(&[], &[(80, 30080)]);
    let ensured = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let svc = with_status(svc, &ensured);

    let changed = annotated(
        svc,
        &[(key::TYPE, ""), (key::CONNECTION_IDLE_TIMEOUT, "120")],
    );
    let before = mutations(&*f.provider);
    let again = f
        .lb()
        .ensure_load_balancer(CLUSTER, &changed, &f.nodes(&[0, 1]))
        .await
        .expect("the NLB is still ensured");
    assert_eq!(mutations(&*f.provider), before, "nothing made or changed");
    assert_eq!(f.kinds().await, (0, 1, 1), "no classic ELB beside the NLB");
    assert_eq!(again.warnings.len(), 1);
    assert!(
        again.warnings[0].message.contains("asks for a classic ELB"),
        "{}",
        again.warnings[0].message
    );

    // Still reconciled: a node leaves the target group.
    f.lb()
        .update_load_balancer(CLUSTER, &changed, &f.nodes(&[0]))
        .await
        .expect("updated");
    let tg = f.target_groups().await[0]
        .target_group_arn()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        f.targets(&tg).await,
        [(f.estate.instances[0].id.clone(), 30080)].into()
    );

    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &changed)
        .await
        .expect("deleted");
    assert_eq!(f.kinds().await, (0, 0, 0));
    assert_eq!(f.security_group_ids().await, groups_before);
    assert_eq!(
        f.ingress(&f.estate.node_security_group).await,
        node_rules_before
    );
}

/// A crash between the classic ELB's creation and its status write: the
/// Service names no load balancer when its type changes, so an NLB is made
/// beside the classic ELB. Deletion still finds and removes both.
#[tokio::test]
async fn deletion_after_a_crash_let_both_kinds_be_made_removes_both() {
    let f = Fixture::new(2).await;
    let groups_before = f.security_group_ids().await;
    let node_rules_before = f.ingress(&f.estate.node_security_group).await;
    let svc = ccm_provider_aws::test_util::classic_service(UID, &[], &[(80, 30080)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let changed = annotated(svc, &[(key::TYPE, "nlb")]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &changed, &f.nodes(&[0, 1]))
        .await
        .expect("ensured as an NLB");
    assert_eq!(f.kinds().await, (1, 1, 1), "both kinds exist");

    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &changed)
        .await
        .expect("deleted");
    assert_eq!(f.kinds().await, (0, 0, 0));
    assert_eq!(f.security_group_ids().await, groups_before);
    assert_eq!(
        f.ingress(&f.estate.node_security_group).await,
        node_rules_before
    );
}
