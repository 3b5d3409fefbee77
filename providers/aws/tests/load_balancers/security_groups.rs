//! The security groups a Service names for its Network Load Balancer,
//! against moto: added or put instead of the provider's own, never given
//! rules or deleted, the provider's own deleted once replaced, and refused
//! where AWS cannot give them.

use std::collections::BTreeSet;

use cloud_provider::CloudError;
use provider_aws::annotations as key;
use provider_aws::test_util::{CLUSTER, ec2};

use crate::fixture::{Fixture, service};

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
