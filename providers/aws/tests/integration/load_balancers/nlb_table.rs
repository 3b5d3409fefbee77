//! Each NLB annotation, one row each, as [`super::classic_table`] does for
//! classic ELBs: from a Service's NLB as the provider made it, the
//! annotation alone is added; the row names the AWS calls that change
//! something (counted by the proxy in front of moto). Values the provider
//! cannot honour on an NLB change nothing.

use std::collections::BTreeSet;

use ccm_cloud_provider::CloudError;
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed;
use ccm_provider_aws::test_util::{CLUSTER, ec2, moto, nlb_service, provider_at};

use super::fixture::UID;

/// `(annotations added, the changing calls; empty: refused)`.
type Row = (
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
);

const ROWS: &[Row] = &[
    (
        &[(key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "true")],
        &["ModifyLoadBalancerAttributes"],
    ),
    (
        &[
            (key::HEALTHCHECK_HEALTHY_THRESHOLD, "2"),
            (key::HEALTHCHECK_UNHEALTHY_THRESHOLD, "5"),
        ],
        &["ModifyTargetGroup"],
    ),
    // The interval is in upstream's target group name: new groups.
    (
        &[(key::HEALTHCHECK_INTERVAL, "10")],
        &[
            "CreateTargetGroup",
            "DeleteTargetGroup",
            "ModifyListener",
            "RegisterTargets",
        ],
    ),
    (
        &[(key::PROXY_PROTOCOL, "*")],
        &["ModifyTargetGroupAttributes"],
    ),
    (
        &[(
            key::TARGET_GROUP_ATTRIBUTES,
            "deregistration_delay.timeout_seconds=30",
        )],
        &["ModifyTargetGroupAttributes"],
    ),
    (&[(key::ADDITIONAL_RESOURCE_TAGS, "team=web")], &["AddTags"]),
    (
        &[(key::TARGET_NODE_LABELS, "pool=none")],
        &["DeregisterTargets", "RevokeSecurityGroupIngress"],
    ),
    (
        &[(key::SOURCE_RANGES, "203.0.113.0/24")],
        &[
            "AuthorizeSecurityGroupIngress",
            "RevokeSecurityGroupIngress",
        ],
    ),
    // Refused: classic-only keys and values, a scheme AWS cannot change,
    // groups an NLB made without any cannot gain.
    (&[(key::CONNECTION_IDLE_TIMEOUT, "120")], &[]),
    (&[(key::BACKEND_PROTOCOL, "http")], &[]),
    (&[(key::INTERNAL, "true")], &[]),
    (&[(key::SECURITY_GROUPS, "sg-0123456789abcdef0")], &[]),
];

#[tokio::test]
async fn each_nlb_annotation_makes_exactly_its_calls() {
    for (added, calls) in ROWS {
        let moto = moto().await;
        let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
        let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
        let provider =
            provider_at(&proxy.endpoint, CLUSTER, &format!("VPC = {}", estate.vpc)).await;
        let lb = provider.load_balancer().expect("AWS has load balancers");
        let nodes = [estate.instances[0].node()];
        let ports = [(80, 30080), (443, 30443)];
        lb.ensure_load_balancer(CLUSTER, &nlb_service(UID, &[], &ports), &nodes)
            .await
            .expect("the baseline NLB");
        let before = proxy.actions();
        let result = lb
            .ensure_load_balancer(CLUSTER, &nlb_service(UID, added, &ports), &nodes)
            .await;
        let made: BTreeSet<String> = proxy
            .actions()
            .into_iter()
            .filter(|(action, n)| {
                !["Describe", "Get", "List"]
                    .iter()
                    .any(|v| action.starts_with(v))
                    && before.get(action) != Some(n)
            })
            .map(|(action, _)| action)
            .collect();
        let wanted: BTreeSet<String> = calls.iter().map(|c| (*c).to_owned()).collect();
        assert_eq!(made, wanted, "{added:?}");
        if calls.is_empty() {
            assert!(
                matches!(result, Err(CloudError::InvalidInput { .. })),
                "{added:?}: {result:?}"
            );
        } else {
            result.unwrap_or_else(|e| panic!("{added:?}: {e}"));
        }
    }
}
