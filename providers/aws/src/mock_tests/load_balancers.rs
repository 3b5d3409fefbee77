//! Load balancers against mocked EC2 and ELBv2: target registration,
//! annotations refused before any call, adoption only by tags, and delete.

use std::time::Duration;

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::operation::delete_security_group::{
    DeleteSecurityGroupError, DeleteSecurityGroupOutput,
};
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
use aws_sdk_ec2::operation::describe_vpcs::DescribeVpcsOutput;
use aws_sdk_ec2::types::{
    Instance, InstanceState, InstanceStateName, Reservation, SecurityGroup, Vpc,
};
use aws_sdk_elasticloadbalancingv2::Client as Elbv2;
use aws_sdk_elasticloadbalancingv2::operation::deregister_targets::DeregisterTargetsOutput;
use aws_sdk_elasticloadbalancingv2::operation::describe_listeners::DescribeListenersOutput;
use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::{
    DescribeLoadBalancersError, DescribeLoadBalancersOutput,
};
use aws_sdk_elasticloadbalancingv2::operation::describe_tags::DescribeTagsOutput;
use aws_sdk_elasticloadbalancingv2::operation::describe_target_groups::DescribeTargetGroupsOutput;
use aws_sdk_elasticloadbalancingv2::operation::describe_target_health::DescribeTargetHealthOutput;
use aws_sdk_elasticloadbalancingv2::operation::register_targets::RegisterTargetsOutput;
use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, Listener, LoadBalancer as Nlb, LoadBalancerSchemeEnum,
    LoadBalancerTypeEnum, Tag, TagDescription, TargetDescription, TargetHealth,
    TargetHealthDescription, TargetHealthStateEnum,
};
use aws_smithy_mocks::{Rule, mock};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{CloudError, LoadBalancer};

use super::*;
use crate::annotations as key;

const UID: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const LB_NAME: &str = "a0f1e2d3c4b5a69788796a5b4c3d2e1f";
const LB_ARN: &str = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/a0f1/1";
const TG_ARN: &str =
    "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web/1";

fn service(annotations: &[(&str, &str)]) -> Service {
    crate::test_util::nlb_service(UID, annotations, &[(80, 30080)])
}

fn no_node_rules() -> AwsConfig {
    AwsConfig {
        disable_security_group_ingress: true,
        ..AwsConfig::default()
    }
}

fn existing_lb() -> Rule {
    mock!(Elbv2::describe_load_balancers).then_output(|| {
        DescribeLoadBalancersOutput::builder()
            .load_balancers(
                Nlb::builder()
                    .load_balancer_name(LB_NAME)
                    .load_balancer_arn(LB_ARN)
                    .r#type(LoadBalancerTypeEnum::Network)
                    .scheme(LoadBalancerSchemeEnum::InternetFacing)
                    .vpc_id("vpc-1")
                    .build(),
            )
            .build()
    })
}

fn tags(cluster: &'static str) -> Rule {
    mock!(Elbv2::describe_tags).then_output(move || {
        DescribeTagsOutput::builder()
            .tag_descriptions(
                TagDescription::builder()
                    .resource_arn(LB_ARN)
                    .tags(
                        Tag::builder()
                            .key(format!("kubernetes.io/cluster/{cluster}"))
                            .value("owned")
                            .build(),
                    )
                    .tags(
                        Tag::builder()
                            .key("kubernetes.io/service-name")
                            .value("shop/web")
                            .build(),
                    )
                    .build(),
            )
            .build()
    })
}

fn listener_to_target_group() -> Rule {
    mock!(Elbv2::describe_listeners).then_output(|| {
        DescribeListenersOutput::builder()
            .listeners(
                Listener::builder()
                    .port(80)
                    .default_actions(
                        Action::builder()
                            .r#type(ActionTypeEnum::Forward)
                            .target_group_arn(TG_ARN)
                            .build(),
                    )
                    .build(),
            )
            .build()
    })
}

fn running_nodes() -> Rule {
    mock!(Ec2::describe_instances).then_output(|| {
        let running = |id: &str| {
            Instance::builder()
                .instance_id(id)
                .state(
                    InstanceState::builder()
                        .name(InstanceStateName::Running)
                        .build(),
                )
                .build()
        };
        DescribeInstancesOutput::builder()
            .reservations(
                Reservation::builder()
                    .instances(running("i-1"))
                    .instances(running("i-2"))
                    .build(),
            )
            .build()
    })
}

fn vpc() -> Rule {
    mock!(Ec2::describe_vpcs).then_output(|| {
        DescribeVpcsOutput::builder()
            .vpcs(
                Vpc::builder()
                    .vpc_id("vpc-1")
                    .cidr_block("10.0.0.0/16")
                    .build(),
            )
            .build()
    })
}

fn health(states: &'static [(&'static str, TargetHealthStateEnum)]) -> Rule {
    mock!(Elbv2::describe_target_health).then_output(move || {
        let mut out = DescribeTargetHealthOutput::builder();
        for (id, state) in states {
            out = out.target_health_descriptions(
                TargetHealthDescription::builder()
                    .target(TargetDescription::builder().id(*id).port(30080).build())
                    .target_health(TargetHealth::builder().state(state.clone()).build())
                    .build(),
            );
        }
        out.build()
    })
}

fn nodes() -> Vec<Arc<Node>> {
    vec![
        node("n1", Some("aws:///us-east-1a/i-1")),
        node("n2", Some("aws:///us-east-1a/i-2")),
    ]
}

#[tokio::test]
async fn unhealthy_and_initial_targets_stay_registered() {
    let health = health(&[
        ("i-1", TargetHealthStateEnum::Unhealthy),
        ("i-2", TargetHealthStateEnum::Initial),
    ]);
    let register =
        mock!(Elbv2::register_targets).then_output(|| RegisterTargetsOutput::builder().build());
    let deregister =
        mock!(Elbv2::deregister_targets).then_output(|| DeregisterTargetsOutput::builder().build());
    let (lb, tags, listeners) = (
        existing_lb(),
        tags("test-cluster"),
        listener_to_target_group(),
    );
    let (instances, vpc) = (running_nodes(), vpc());
    let provider = provider_with(
        no_node_rules(),
        &[&instances, &vpc],
        &[&lb, &tags, &listeners, &health, &register, &deregister],
        GENEROUS,
    );
    provider
        .update_load_balancer("test-cluster", &service(&[]), &nodes())
        .await
        .expect("updated");
    assert_eq!(health.num_calls(), 1);
    assert_eq!((register.num_calls(), deregister.num_calls()), (0, 0));
}

#[tokio::test]
async fn a_draining_target_that_is_wanted_again_is_registered_again() {
    let health = health(&[
        ("i-1", TargetHealthStateEnum::Draining),
        ("i-2", TargetHealthStateEnum::Healthy),
    ]);
    let register = mock!(Elbv2::register_targets)
        .match_requests(|r| {
            r.target_group_arn() == Some(TG_ARN)
                && r.targets()
                    .iter()
                    .map(|t| (t.id(), t.port()))
                    .collect::<Vec<_>>()
                    == [(Some("i-1"), Some(30080))]
        })
        .then_output(|| RegisterTargetsOutput::builder().build());
    let (lb, tags, listeners) = (
        existing_lb(),
        tags("test-cluster"),
        listener_to_target_group(),
    );
    let (instances, vpc) = (running_nodes(), vpc());
    let provider = provider_with(
        no_node_rules(),
        &[&instances, &vpc],
        &[&lb, &tags, &listeners, &health, &register],
        GENEROUS,
    );
    provider
        .update_load_balancer("test-cluster", &service(&[]), &nodes())
        .await
        .expect("updated");
    assert_eq!(register.num_calls(), 1);
}

#[tokio::test]
async fn a_malformed_annotation_is_refused_before_any_call() {
    // No rules: any call to AWS would panic.
    let provider = provider(&[], &[]);
    let svc = service(&[(key::HEALTHCHECK_PORT, "eighty")]);
    let err = provider
        .ensure_load_balancer("test-cluster", &svc, &nodes())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::HEALTHCHECK_PORT),
        "{err:?}"
    );
    let err = provider
        .update_load_balancer("test-cluster", &svc, &nodes())
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::InvalidInput { .. }), "{err:?}");
}

#[tokio::test]
async fn a_load_balancer_with_the_name_but_not_the_tags_is_never_adopted() {
    let (lb, tags) = (existing_lb(), tags("another-cluster"));
    let groups = mock!(Elbv2::describe_target_groups)
        .then_output(|| DescribeTargetGroupsOutput::builder().build());
    let provider = provider(&[], &[&lb, &groups, &tags]);
    let err = provider
        .ensure_load_balancer("test-cluster", &service(&[]), &nodes())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refusing to adopt"), "{err}");
    // Nor reported as the Service's.
    assert_eq!(
        provider
            .get_load_balancer("test-cluster", &service(&[]))
            .await
            .expect("answered"),
        None
    );
}

#[tokio::test]
async fn asking_an_existing_load_balancer_to_turn_internal_is_invalid_input() {
    let (lb, tags) = (existing_lb(), tags("test-cluster"));
    let groups = mock!(Elbv2::describe_target_groups)
        .then_output(|| DescribeTargetGroupsOutput::builder().build());
    let provider = provider(&[], &[&lb, &groups, &tags]);
    let err = provider
        .ensure_load_balancer(
            "test-cluster",
            &service(&[(key::INTERNAL, "true")]),
            &nodes(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::INTERNAL),
        "{err:?}"
    );
}

/// Deleting an NLB's Service also looks for a classic ELB of its name
/// (left by a type change): none here.
fn no_classic_elb() -> Rule {
    mock!(aws_sdk_elasticloadbalancing::Client::describe_load_balancers).then_error(|| {
        aws_sdk_elasticloadbalancing::operation::describe_load_balancers::DescribeLoadBalancersError::generic(
            aws_error("LoadBalancerNotFound"),
        )
    })
}

#[tokio::test]
async fn a_security_group_aws_still_holds_makes_delete_retry_until_it_lets_go() {
    let no_lb = mock!(Elbv2::describe_load_balancers)
        .then_error(|| DescribeLoadBalancersError::generic(aws_error("LoadBalancerNotFound")));
    let no_target_groups = mock!(Elbv2::describe_target_groups)
        .then_output(|| DescribeTargetGroupsOutput::builder().build());
    let group = mock!(Ec2::describe_security_groups).then_output(|| {
        DescribeSecurityGroupsOutput::builder()
            .security_groups(
                SecurityGroup::builder()
                    .group_id("sg-lb")
                    .group_name("k8s-shop-web-0123456789")
                    .tags(
                        aws_sdk_ec2::types::Tag::builder()
                            .key("kubernetes.io/cluster/test-cluster")
                            .value("owned")
                            .build(),
                    )
                    .tags(
                        aws_sdk_ec2::types::Tag::builder()
                            .key("kubernetes.io/service-name")
                            .value("shop/web")
                            .build(),
                    )
                    .build(),
            )
            .build()
    });
    let delete = mock!(Ec2::delete_security_group)
        .match_requests(|r| r.group_id() == Some("sg-lb"))
        .sequence()
        .error(|| DeleteSecurityGroupError::generic(aws_error("DependencyViolation")))
        .output(|| DeleteSecurityGroupOutput::builder().build())
        .build();
    let no_classic = no_classic_elb();
    let provider = provider_with_classic(
        no_node_rules(),
        &[&group, &delete],
        &[&no_classic],
        &[&no_lb, &no_target_groups],
        GENEROUS,
    );

    let err = provider
        .ensure_load_balancer_deleted("test-cluster", &service(&[]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::Retry { after, reason } if *after == Duration::from_secs(10) && reason.contains("sg-lb")),
        "{err:?}"
    );
    provider
        .ensure_load_balancer_deleted("test-cluster", &service(&[]))
        .await
        .expect("deleted once AWS let go");
    assert_eq!(delete.num_calls(), 2);
}

#[tokio::test]
async fn deleting_works_whatever_the_annotations_say() {
    let no_lb = mock!(Elbv2::describe_load_balancers)
        .then_error(|| DescribeLoadBalancersError::generic(aws_error("LoadBalancerNotFound")));
    let no_target_groups = mock!(Elbv2::describe_target_groups)
        .then_output(|| DescribeTargetGroupsOutput::builder().build());
    let no_groups = mock!(Ec2::describe_security_groups)
        .then_output(|| DescribeSecurityGroupsOutput::builder().build());
    let no_classic = no_classic_elb();
    let provider = provider_with_classic(
        no_node_rules(),
        &[&no_groups],
        &[&no_classic],
        &[&no_lb, &no_target_groups],
        GENEROUS,
    );
    let svc = service(&[(key::HEALTHCHECK_PORT, "eighty")]);
    provider
        .ensure_load_balancer_deleted("test-cluster", &svc)
        .await
        .expect("nothing left");
    let external = service(&[(key::TYPE, "external")]);
    assert!(matches!(
        provider
            .ensure_load_balancer_deleted("test-cluster", &external)
            .await,
        Err(CloudError::ImplementedElsewhere)
    ));
}
