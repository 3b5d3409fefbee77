//! `load_balancer_health` against mocked ELB and ELBv2 answering target
//! states moto never gives (`unhealthy` for `Target.Timeout`, `initial`),
//! the calls it costs, and AWS's quota errors as `QuotaExceeded`.

use aws_sdk_elasticloadbalancing::Client as Elb;
use aws_sdk_elasticloadbalancing::operation::describe_instance_health::{
    DescribeInstanceHealthError, DescribeInstanceHealthOutput,
};
use aws_sdk_elasticloadbalancing::types::InstanceState;
use aws_sdk_elasticloadbalancingv2::Client as Elbv2;
use aws_sdk_elasticloadbalancingv2::operation::create_load_balancer::CreateLoadBalancerError;
use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::{
    DescribeLoadBalancersError, DescribeLoadBalancersOutput,
};
use aws_sdk_elasticloadbalancingv2::operation::describe_target_groups::DescribeTargetGroupsOutput;
use aws_sdk_elasticloadbalancingv2::operation::describe_target_health::DescribeTargetHealthOutput;
use aws_sdk_elasticloadbalancingv2::types::{
    LoadBalancer as Nlb, LoadBalancerTypeEnum, TargetDescription, TargetGroup,
    TargetHealth as AwsHealth, TargetHealthDescription, TargetHealthReasonEnum,
    TargetHealthStateEnum,
};
use aws_smithy_mocks::{Rule, mock};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus,
};
use ccm_cloud_provider::{
    CloudError, LoadBalancer, LoadBalancerHealth, TargetHealth, TargetState, health_by_node,
};

use super::*;

const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const LB_NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";
const LB_ARN: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/a0f1/1";
const TG_80: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-80/1";
const TG_443: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-443/2";

fn nodes() -> Vec<Arc<Node>> {
    vec![
        node("n1", Some("aws:///us-east-1a/i-1")),
        node("n2", Some("aws:///us-east-1b/i-2")),
    ]
}

fn unhealthy(reason: &str) -> TargetState {
    TargetState::Unhealthy {
        reason: reason.into(),
    }
}

fn the_nlb() -> Rule {
    mock!(Elbv2::describe_load_balancers)
        .match_requests(|r| r.names() == [LB_NAME])
        .then_output(|| {
            DescribeLoadBalancersOutput::builder()
                .load_balancers(
                    Nlb::builder()
                        .load_balancer_name(LB_NAME)
                        .load_balancer_arn(LB_ARN)
                        .r#type(LoadBalancerTypeEnum::Network)
                        .build(),
                )
                .build()
        })
}

fn no_nlb() -> Rule {
    mock!(Elbv2::describe_load_balancers)
        .then_error(|| DescribeLoadBalancersError::generic(aws_error("LoadBalancerNotFound")))
}

/// A target group per Service port, as an ensure makes them.
fn a_group_per_port() -> Rule {
    mock!(Elbv2::describe_target_groups)
        .match_requests(|r| r.load_balancer_arn() == Some(LB_ARN) && r.names().is_empty())
        .then_output(|| {
            DescribeTargetGroupsOutput::builder()
                .target_groups(TargetGroup::builder().target_group_arn(TG_80).build())
                .target_groups(TargetGroup::builder().target_group_arn(TG_443).build())
                .build()
        })
}

type Target = (
    &'static str,
    TargetHealthStateEnum,
    Option<TargetHealthReasonEnum>,
);

fn health_of(arn: &'static str, targets: Vec<Target>) -> Rule {
    mock!(Elbv2::describe_target_health)
        .match_requests(move |r| r.target_group_arn() == Some(arn))
        .then_output(move || {
            let mut out = DescribeTargetHealthOutput::builder();
            for (id, state, reason) in &targets {
                out = out.target_health_descriptions(
                    TargetHealthDescription::builder()
                        .target(TargetDescription::builder().id(*id).port(30080).build())
                        .target_health(
                            AwsHealth::builder()
                                .state(state.clone())
                                .set_reason(reason.clone())
                                .build(),
                        )
                        .build(),
                );
            }
            out.build()
        })
}

/// Successful calls by upstream's `request` label, sorted.
fn calls(provider: &AwsProvider) -> Vec<String> {
    let prefix = "cloudprovider_aws_api_request_duration_seconds_count{request=\"";
    let mut calls: Vec<String> = metrics(provider)
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|l| l.replace("\"} ", " "))
        .collect();
    calls.sort();
    calls
}

fn had_load_balancer(mut service: Service) -> Service {
    service.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                hostname: Some(format!("{LB_NAME}.elb.amazonaws.com")),
                ..LoadBalancerIngress::default()
            }]),
        }),
        ..ServiceStatus::default()
    });
    service
}

#[tokio::test]
async fn an_nlb_reports_each_node_once_per_target_group_named_by_its_node() {
    use TargetHealthReasonEnum as Reason;
    use TargetHealthStateEnum as State;
    let (lb, groups) = (the_nlb(), a_group_per_port());
    // i-2's instance is stopped: its health checks time out.
    let port_80 = health_of(
        TG_80,
        vec![
            ("i-1", State::Healthy, None),
            ("i-2", State::Unhealthy, Some(Reason::Timeout)),
        ],
    );
    let port_443 = health_of(
        TG_443,
        vec![
            ("i-1", State::Initial, Some(Reason::InitialHealthChecking)),
            ("i-2", State::Unhealthy, Some(Reason::Timeout)),
            ("i-9", State::Healthy, None),
        ],
    );
    // No EC2 rules and no DescribeTags: either would panic.
    let provider = provider(&[], &[&lb, &groups, &port_80, &port_443]);
    let svc = crate::test_util::nlb_service(UID, &[], &[(80, 30080), (443, 30443)]);
    let health = provider
        .load_balancer_health("test-cluster", &svc, &nodes())
        .await
        .expect("answered")
        .expect("AWS can tell");
    assert_eq!(
        health.targets,
        [
            TargetHealth::new("n1", TargetState::Healthy),
            TargetHealth::new("n2", unhealthy("Target.Timeout")),
            TargetHealth::new("n1", TargetState::Initial),
            TargetHealth::new("n2", unhealthy("Target.Timeout")),
            TargetHealth::new("i-9", TargetState::Healthy),
        ]
    );
    assert_eq!(
        health_by_node(&health),
        [
            TargetHealth::new("i-9", TargetState::Healthy),
            TargetHealth::new("n1", TargetState::Initial),
            TargetHealth::new("n2", unhealthy("Target.Timeout")),
        ]
    );
    assert_eq!(
        calls(&provider),
        [
            "describe_load_balancers 1",
            "describe_target_groups 1",
            "describe_target_health 2",
        ]
    );
}

#[tokio::test]
async fn a_classic_elb_reports_its_instances_from_one_call() {
    let instances = mock!(Elb::describe_instance_health)
        .match_requests(|r| r.load_balancer_name() == Some(LB_NAME) && r.instances().is_empty())
        .then_output(|| {
            let state = |id: &str, state: &str, reason: &str| {
                InstanceState::builder()
                    .instance_id(id)
                    .state(state)
                    .reason_code(reason)
                    .build()
            };
            DescribeInstanceHealthOutput::builder()
                .instance_states(state("i-1", "InService", "N/A"))
                .instance_states(state("i-2", "OutOfService", "Instance"))
                .instance_states(state("i-3", "Unknown", "ELB"))
                .build()
        });
    let provider = provider_with_classic(AwsConfig::default(), &[], &[&instances], &[], GENEROUS);
    let svc = crate::test_util::classic_service(UID, &[], &[(80, 30080)]);
    let health = provider
        .load_balancer_health("test-cluster", &svc, &nodes())
        .await
        .expect("answered");
    assert_eq!(
        health,
        Some(LoadBalancerHealth {
            targets: vec![
                TargetHealth::new("n1", TargetState::Healthy),
                TargetHealth::new("n2", unhealthy("Instance")),
                TargetHealth::new("i-3", TargetState::Initial),
            ]
        })
    );
    assert_eq!(calls(&provider), ["describe_instance_health 1"]);
}

#[tokio::test]
async fn no_load_balancer_is_one_without_targets_and_a_changed_type_reports_the_one_it_has() {
    let provider = provider(&[], &[&no_nlb()]);
    let svc = crate::test_util::nlb_service(UID, &[], &[(80, 30080)]);
    let health = provider
        .load_balancer_health("test-cluster", &svc, &nodes())
        .await
        .expect("answered");
    assert_eq!(health, Some(LoadBalancerHealth::default()));

    // Asking for an NLB, the Service still has the classic ELB it had.
    let classic = mock!(Elb::describe_instance_health)
        .match_requests(|r| r.load_balancer_name() == Some(LB_NAME))
        .then_output(|| {
            DescribeInstanceHealthOutput::builder()
                .instance_states(
                    InstanceState::builder()
                        .instance_id("i-2")
                        .state("InService")
                        .build(),
                )
                .build()
        });
    let (nlb_gone, still_gone) = (no_nlb(), no_nlb());
    let provider = provider_with_classic(
        AwsConfig::default(),
        &[],
        &[&classic],
        &[&nlb_gone],
        GENEROUS,
    );
    let health = provider
        .load_balancer_health("test-cluster", &had_load_balancer(svc.clone()), &nodes())
        .await
        .expect("answered");
    assert_eq!(
        health.map(|h| h.targets),
        Some(vec![TargetHealth::new("n2", TargetState::Healthy)])
    );

    // Neither kind exists (deleted meanwhile): no targets.
    let neither = mock!(Elb::describe_instance_health)
        .then_error(|| DescribeInstanceHealthError::generic(aws_error("LoadBalancerNotFound")));
    let provider = provider_with_classic(
        AwsConfig::default(),
        &[],
        &[&neither],
        &[&still_gone],
        GENEROUS,
    );
    let health = provider
        .load_balancer_health("test-cluster", &had_load_balancer(svc), &nodes())
        .await
        .expect("answered");
    assert_eq!(health, Some(LoadBalancerHealth::default()));
    assert_eq!(neither.num_calls(), 1);
}

#[tokio::test]
async fn a_service_another_controller_owns_is_left_to_it() {
    // No rules: any call would panic.
    let provider = provider(&[], &[]);
    let svc = crate::test_util::nlb_service(UID, &[(crate::annotations::TYPE, "external")], &[]);
    let err = provider
        .load_balancer_health("test-cluster", &svc, &nodes())
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::ImplementedElsewhere), "{err:?}");
}

#[tokio::test]
async fn aws_refusing_a_load_balancer_for_the_accounts_limit_is_quota_exceeded() {
    let refused = mock!(Elbv2::create_load_balancer)
        .then_error(|| CreateLoadBalancerError::generic(aws_error("TooManyLoadBalancers")));
    let provider = provider(&[], &[&refused]);
    let cloud = provider.cloud().expect("initialized");
    let err: CloudError = cloud
        .api
        .call("CreateLoadBalancer", || {
            cloud.api.elbv2.create_load_balancer().name(LB_NAME).send()
        })
        .await
        .unwrap_err()
        .into();
    match err {
        CloudError::QuotaExceeded { message } => assert_eq!(
            message,
            "CreateLoadBalancer failed: TooManyLoadBalancers: TooManyLoadBalancers (scripted)"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(refused.num_calls(), 1, "not retried");
}
