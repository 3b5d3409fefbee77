//! Each classic-ELB annotation, one row each: from a Service's ELB as the
//! provider made it, the annotation alone is added, and the row names the
//! AWS calls that change something (counted by the proxy in front of moto)
//! and checks the field they changed. Values the provider cannot honour
//! change nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_elasticloadbalancing::types::{LoadBalancerAttributes, LoadBalancerDescription};
use ccm_cloud_provider::{CloudError, CloudProvider};
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{CLUSTER, Moto, classic_service, ec2, elb, moto, provider_at};

use super::fixture::UID;

/// What AWS holds after the change.
struct After {
    lb: LoadBalancerDescription,
    attributes: LoadBalancerAttributes,
    tags: BTreeMap<String, String>,
}

/// `(annotations added, the changing calls, a check of AWS after them)`.
type Row = (
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
    fn(&After) -> bool,
);

const ROWS: &[Row] = &[
    (
        &[(key::CONNECTION_IDLE_TIMEOUT, "120")],
        &["ModifyLoadBalancerAttributes"],
        |a| a.attributes.connection_settings().map(|c| c.idle_timeout()) == Some(120),
    ),
    (
        &[
            (key::CONNECTION_DRAINING_ENABLED, "true"),
            (key::CONNECTION_DRAINING_TIMEOUT, "45"),
        ],
        &["ModifyLoadBalancerAttributes"],
        |a| {
            a.attributes
                .connection_draining()
                .is_some_and(|d| d.enabled() && d.timeout() == Some(45))
        },
    ),
    (
        &[(key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "true")],
        &["ModifyLoadBalancerAttributes"],
        |a| {
            a.attributes
                .cross_zone_load_balancing()
                .is_some_and(|c| c.enabled())
        },
    ),
    (
        &[
            (key::ACCESS_LOG_ENABLED, "true"),
            (key::ACCESS_LOG_EMIT_INTERVAL, "60"),
            (key::ACCESS_LOG_S3_BUCKET_NAME, "logs"),
            (key::ACCESS_LOG_S3_BUCKET_PREFIX, "shop"),
        ],
        &["ModifyLoadBalancerAttributes"],
        |a| {
            a.attributes.access_log().is_some_and(|l| {
                l.enabled()
                    && l.emit_interval() == Some(60)
                    && l.s3_bucket_name() == Some("logs")
                    && l.s3_bucket_prefix() == Some("shop")
            })
        },
    ),
    (
        &[
            (key::HEALTHCHECK_INTERVAL, "30"),
            (key::HEALTHCHECK_TIMEOUT, "7"),
            (key::HEALTHCHECK_HEALTHY_THRESHOLD, "3"),
            (key::HEALTHCHECK_UNHEALTHY_THRESHOLD, "4"),
        ],
        &["ConfigureHealthCheck"],
        |a| {
            a.lb.health_check().is_some_and(|h| {
                (
                    h.interval(),
                    h.timeout(),
                    h.healthy_threshold(),
                    h.unhealthy_threshold(),
                ) == (30, 7, 3, 4)
            })
        },
    ),
    (
        &[
            (key::HEALTHCHECK_PROTOCOL, "http"),
            (key::HEALTHCHECK_PORT, "8080"),
            (key::HEALTHCHECK_PATH, "/ready"),
        ],
        &["ConfigureHealthCheck"],
        |a| a.lb.health_check().map(|h| h.target()) == Some("HTTP:8080/ready"),
    ),
    (
        &[(key::PROXY_PROTOCOL, "*")],
        &[
            "CreateLoadBalancerPolicy",
            "SetLoadBalancerPoliciesForBackendServer",
        ],
        |a| {
            a.lb.backend_server_descriptions()
                .iter()
                .filter(|b| b.policy_names() == ["k8s-proxyprotocol-enabled"])
                .count()
                == 2
        },
    ),
    (
        &[(key::BACKEND_PROTOCOL, "http")],
        &["CreateLoadBalancerListeners", "DeleteLoadBalancerListeners"],
        |a| {
            a.lb.listener_descriptions()
                .iter()
                .filter_map(|d| d.listener())
                .all(|l| l.protocol().eq_ignore_ascii_case("HTTP"))
        },
    ),
    (
        &[(key::ADDITIONAL_RESOURCE_TAGS, "team=web")],
        &["AddTags"],
        |a| a.tags.get("team").map(String::as_str) == Some("web"),
    ),
    (
        &[(key::SOURCE_RANGES, "203.0.113.0/24")],
        &[
            "AuthorizeSecurityGroupIngress",
            "RevokeSecurityGroupIngress",
        ],
        |a| a.lb.security_groups().len() == 1,
    ),
    (
        &[(key::TARGET_NODE_LABELS, "pool=none")],
        &[
            "DeregisterInstancesFromLoadBalancer",
            "RevokeSecurityGroupIngress",
        ],
        |a| a.lb.instances().is_empty(),
    ),
    // Values the provider cannot honour, and a typo: nothing changes.
    (&[(key::INTERNAL, "true")], &[], |a| {
        a.lb.scheme() == Some("internet-facing")
    }),
    (&[(key::EIP_ALLOCATIONS, "eipalloc-0123")], &[], |_| true),
    (&[(key::HEALTHCHECK_TIMEOUT, "10")], &[], |a| {
        a.lb.health_check().map(|h| h.timeout()) == Some(5)
    }),
    (
        &[(
            "service.beta.kubernetes.io/aws-load-balancer-conection-idle-timeout",
            "5",
        )],
        &[],
        |a| a.attributes.connection_settings().map(|c| c.idle_timeout()) == Some(60),
    ),
];

/// Actions that change something in AWS.
fn is_change(action: &str) -> bool {
    !["Describe", "Get", "List"]
        .iter()
        .any(|verb| action.starts_with(verb))
}

async fn after(moto: &Moto, name: &str) -> After {
    let elb = elb(moto);
    let lb = elb
        .describe_load_balancers()
        .load_balancer_names(name)
        .send()
        .await
        .expect("described")
        .load_balancer_descriptions()[0]
        .clone();
    let attributes = elb
        .describe_load_balancer_attributes()
        .load_balancer_name(name)
        .send()
        .await
        .expect("described")
        .load_balancer_attributes()
        .cloned()
        .expect("attributes");
    let tags = elb
        .describe_tags()
        .load_balancer_names(name)
        .send()
        .await
        .expect("described")
        .tag_descriptions()
        .iter()
        .flat_map(|d| d.tags())
        .map(|t| (t.key().to_owned(), t.value().unwrap_or_default().to_owned()))
        .collect();
    After {
        lb,
        attributes,
        tags,
    }
}

async fn baseline(estate: &Estate, proxy: &Proxy) -> Arc<dyn CloudProvider> {
    let provider = provider_at(&proxy.endpoint, CLUSTER, &format!("VPC = {}", estate.vpc)).await;
    let svc = classic_service(UID, &[], &[(80, 30080), (443, 30443)]);
    provider
        .load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer(CLUSTER, &svc, &[estate.instances[0].node()])
        .await
        .expect("the baseline ELB");
    provider
}

#[tokio::test]
async fn each_classic_annotation_makes_exactly_its_calls() {
    for (added, calls, check) in ROWS {
        let moto = moto().await;
        let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
        let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
        let provider = baseline(&estate, &proxy).await;
        let svc = classic_service(UID, added, &[(80, 30080), (443, 30443)]);
        let before = proxy.actions();
        let result = provider
            .load_balancer()
            .expect("AWS has load balancers")
            .ensure_load_balancer(CLUSTER, &svc, &[estate.instances[0].node()])
            .await;
        let made: BTreeSet<String> = proxy
            .actions()
            .into_iter()
            .filter(|(action, n)| is_change(action) && before.get(action) != Some(n))
            .map(|(action, _)| action)
            .collect();
        let wanted: BTreeSet<String> = calls.iter().map(|c| (*c).to_owned()).collect();
        assert_eq!(made, wanted, "{added:?}");
        if calls.is_empty() && !added[0].0.contains("conection") {
            assert!(
                matches!(result, Err(CloudError::InvalidInput { .. })),
                "{added:?}: {result:?}"
            );
        } else {
            result.unwrap_or_else(|e| panic!("{added:?}: {e}"));
        }
        let name = super::fixture::LB_NAME;
        assert!(check(&after(&moto, name).await), "{added:?}");
    }
}
