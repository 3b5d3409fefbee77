//! Security groups of Network Load Balancers against moto. The ones a
//! Service names: added or put instead of the provider's own, never given
//! rules or deleted, the provider's own deleted once replaced, and refused
//! where AWS cannot give them. The provider's own (the managed mode): the
//! rules upstream gives it. `ElbSecurityGroup`: for classic ELBs only.

use std::collections::BTreeSet;
use std::sync::Arc;

use aws_sdk_ec2::types::{IpPermission, IpRange};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, CloudProvider};
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::{
    CLUSTER, IngressRule, classic_service, ec2, elb, nlb_service, provider,
};

use super::fixture::{Fixture, mutations, rule, service};

/// A security group made by hand in the estate's VPC.
async fn group(f: &Fixture, name: &str) -> String {
    ec2(&f.moto)
        .create_security_group()
        .group_name(name)
        .description("made by hand")
        .vpc_id(&f.estate.vpc)
        .send()
        .await
        .expect("created")
        .group_id()
        .expect("an ID")
        .to_owned()
}

fn attached(f: &[aws_sdk_elasticloadbalancingv2::types::LoadBalancer]) -> BTreeSet<String> {
    f[0].security_groups().iter().cloned().collect()
}

#[tokio::test]
async fn named_groups_need_a_load_balancer_that_can_have_groups() {
    let f = Fixture::new(1).await;
    let mine = group(&f, "mine").await;
    for field in [key::SECURITY_GROUPS, key::EXTRA_SECURITY_GROUPS] {
        let err = f
            .lb()
            .ensure_load_balancer(
                CLUSTER,
                &service(&[(field, &mine)], &[(80, 30080)]),
                &f.nodes(&[0]),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CloudError::InvalidInput { field: named, message }
                if named == field && message.contains("NLBSecurityGroupMode = Managed")),
            "{err:?}"
        );
    }
    assert!(f.load_balancers().await.is_empty(), "nothing was made");
}

#[tokio::test]
async fn extra_groups_join_the_own_one_and_named_ones_replace_it() {
    let f = Fixture::with_global(1, "NLBSecurityGroupMode = Managed").await;
    let nodes = f.nodes(&[0]);
    let before = f.security_group_ids().await;
    let extra = group(&f, "extra").await;
    let instead = group(&f, "instead").await;

    f.lb()
        .ensure_load_balancer(
            CLUSTER,
            &service(&[(key::EXTRA_SECURITY_GROUPS, &extra)], &[(80, 30080)]),
            &nodes,
        )
        .await
        .expect("ensured");
    let groups = attached(&f.load_balancers().await);
    let own: Vec<String> = f
        .security_group_ids()
        .await
        .into_iter()
        .filter(|g| !before.contains(g) && *g != extra && *g != instead)
        .collect();
    assert_eq!(own.len(), 1, "the provider made its own group");
    assert_eq!(groups, BTreeSet::from([own[0].clone(), extra.clone()]));
    assert!(
        f.ingress(&extra).await.is_empty(),
        "a named group gets no rules"
    );

    // Named instead: the own group is replaced, and deleted.
    f.lb()
        .ensure_load_balancer(
            CLUSTER,
            &service(
                &[
                    (key::SECURITY_GROUPS, &instead),
                    (key::EXTRA_SECURITY_GROUPS, &extra),
                ],
                &[(80, 30080)],
            ),
            &nodes,
        )
        .await
        .expect("ensured");
    assert_eq!(
        attached(&f.load_balancers().await),
        BTreeSet::from([instead.clone(), extra.clone()])
    );
    assert!(
        !f.security_group_ids().await.contains(&own[0]),
        "own group deleted"
    );

    // Deleting the Service leaves the named groups alone.
    f.lb()
        .ensure_load_balancer_deleted(
            CLUSTER,
            &service(&[(key::SECURITY_GROUPS, &instead)], &[(80, 30080)]),
        )
        .await
        .expect("deleted");
    let left = f.security_group_ids().await;
    assert!(left.contains(&instead) && left.contains(&extra), "{left:?}");
    assert!(f.ingress(&instead).await.is_empty());
}

/// The provider against the fixture's moto with `global` in `[Global]`.
async fn provider_with(f: &Fixture, global: &str) -> Arc<dyn CloudProvider> {
    provider(&f.moto, &format!("VPC = {}\n{global}", f.estate.vpc)).await
}

async fn ensure(p: &dyn CloudProvider, f: &Fixture, svc: &Service) -> Result<(), CloudError> {
    p.load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer(CLUSTER, svc, &f.nodes(&[0]))
        .await
        .map(drop)
}

/// The groups of the NLB named `name`.
async fn nlb_groups(f: &Fixture, name: &str) -> BTreeSet<String> {
    f.load_balancers()
        .await
        .iter()
        .find(|lb| lb.load_balancer_name() == Some(name))
        .expect("the NLB")
        .security_groups()
        .iter()
        .cloned()
        .collect()
}

fn icmp(cidr: &str) -> IngressRule {
    ("icmp".into(), 3, 4, cidr.into(), String::new())
}

#[tokio::test]
async fn the_own_group_admits_the_source_ranges_to_the_listeners_as_upstream() {
    let f = Fixture::with_global(1, "NLBSecurityGroupMode = Managed").await;
    // Internal changes nothing: upstream's default range is anywhere.
    let mut svc = service(&[(key::INTERNAL, "true")], &[(80, 30080)]);
    ensure(&*f.provider, &f, &svc).await.expect("ensured");
    let own = attached(&f.load_balancers().await);
    assert_eq!(own.len(), 1);
    let own = own.into_iter().next().expect("one");
    assert_eq!(
        f.ingress(&own).await,
        BTreeSet::from([rule("tcp", 80, "0.0.0.0/0", ""), icmp("0.0.0.0/0")])
    );

    // The spec's source ranges replace anywhere; a rule added by hand goes.
    ec2(&f.moto)
        .authorize_security_group_ingress()
        .group_id(&own)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(22)
                .to_port(22)
                .ip_ranges(IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .send()
        .await
        .expect("authorized");
    let spec = svc.spec.as_mut().expect("spec");
    spec.load_balancer_source_ranges =
        Some(vec!["203.0.113.0/24".into(), "198.51.100.0/24".into()]);
    ensure(&*f.provider, &f, &svc).await.expect("ensured");
    assert_eq!(
        f.ingress(&own).await,
        BTreeSet::from([
            rule("tcp", 80, "198.51.100.0/24", ""),
            rule("tcp", 80, "203.0.113.0/24", ""),
            icmp("198.51.100.0/24"),
            icmp("203.0.113.0/24"),
        ])
    );
}

#[tokio::test]
async fn elb_security_group_is_for_classic_elbs_and_never_given_to_an_nlb() {
    let f = Fixture::new(1).await;
    let configured = group(&f, "configured").await;
    let plain = provider_with(&f, &format!("ElbSecurityGroup = {configured}")).await;
    let groups_before = f.security_group_ids().await;

    // Upstream's default mode: a new NLB gets no group, and so cannot
    // take the ones a Service names.
    let nlb = nlb_service("aaaaaaaa-0000-0000-0000-000000000000", &[], &[(80, 30080)]);
    ensure(&*plain, &f, &nlb).await.expect("ensured");
    let name = plain
        .load_balancer()
        .expect("lb")
        .load_balancer_name(CLUSTER, &nlb);
    assert_eq!(nlb_groups(&f, &name).await, BTreeSet::new());
    assert_eq!(f.security_group_ids().await, groups_before, "none made");
    let named = nlb_service(
        "bbbbbbbb-0000-0000-0000-000000000000",
        &[(key::EXTRA_SECURITY_GROUPS, &configured)],
        &[(80, 30081)],
    );
    let err = ensure(&*plain, &f, &named).await.unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { message, .. } if message.contains("NLBSecurityGroupMode = Managed")),
        "{err:?}"
    );

    // A classic ELB gets it.
    let classic = classic_service("cccccccc-0000-0000-0000-000000000000", &[], &[(80, 30082)]);
    ensure(&*plain, &f, &classic).await.expect("ensured");
    let elbs = elb(&f.moto)
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    assert_eq!(
        elbs.load_balancer_descriptions()[0].security_groups(),
        std::slice::from_ref(&configured)
    );

    // The managed mode: a new NLB gets its own group, with upstream's rules.
    let managed = provider_with(
        &f,
        &format!("ElbSecurityGroup = {configured}\nNLBSecurityGroupMode = Managed"),
    )
    .await;
    let nlb = nlb_service("dddddddd-0000-0000-0000-000000000000", &[], &[(80, 30083)]);
    ensure(&*managed, &f, &nlb).await.expect("ensured");
    let name = managed
        .load_balancer()
        .expect("lb")
        .load_balancer_name(CLUSTER, &nlb);
    let groups = nlb_groups(&f, &name).await;
    assert_eq!(groups.len(), 1, "{groups:?}");
    let own = groups.into_iter().next().expect("one");
    assert_ne!(own, configured);
    assert_eq!(
        f.ingress(&own).await,
        BTreeSet::from([rule("tcp", 80, "0.0.0.0/0", ""), icmp("0.0.0.0/0")])
    );
    assert!(f.ingress(&configured).await.is_empty(), "never given rules");
}

/// An NLB this provider gave `ElbSecurityGroup` before it followed
/// upstream: kept as it is outside the managed mode, given its own group in
/// it, as upstream's `ensureNLBSecurityGroup` treats an existing NLB.
#[tokio::test]
async fn an_existing_nlb_keeps_its_groups_outside_the_managed_mode_and_gets_its_own_in_it() {
    let f = Fixture::with_global(1, "NLBSecurityGroupMode = Managed").await;
    let configured = group(&f, "configured").await;
    let svc = service(&[(key::SECURITY_GROUPS, &configured)], &[(80, 30080)]);
    ensure(&*f.provider, &f, &svc).await.expect("ensured");
    let svc = service(&[], &[(80, 30080)]);
    let groups_before = f.security_group_ids().await;

    for global in [format!("ElbSecurityGroup = {configured}"), String::new()] {
        let plain = provider_with(&f, &global).await;
        ensure(&*plain, &f, &svc).await.expect("ensured");
        assert_eq!(
            mutations(&*plain),
            Default::default(),
            "{global:?}: nothing made or changed"
        );
        assert_eq!(
            attached(&f.load_balancers().await),
            BTreeSet::from([configured.clone()])
        );
        assert_eq!(f.security_group_ids().await, groups_before);
    }

    ensure(&*f.provider, &f, &svc).await.expect("ensured");
    let groups = attached(&f.load_balancers().await);
    assert_eq!(groups.len(), 1);
    assert!(!groups.contains(&configured), "{groups:?}");
    assert!(
        f.security_group_ids().await.contains(&configured),
        "a group the cluster does not own is never deleted"
    );
}
