//! Throttling and transient errors against mocked EC2 and ELBv2: surfaced
//! as `Throttled`, the client-side limit, and retries within a call.

use std::time::Duration;

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::operation::describe_instances::{DescribeInstancesError, DescribeInstancesOutput};
use aws_sdk_ec2::types::{Instance, InstanceState, InstanceStateName, Reservation};
use aws_sdk_elasticloadbalancingv2::Client as Elbv2;
use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersError;
use aws_smithy_mocks::mock;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, Instances, LoadBalancer};

use super::*;

const NODE_ID: &str = "aws:///us-east-1a/i-0abc";

fn running() -> DescribeInstancesOutput {
    DescribeInstancesOutput::builder()
        .reservations(
            Reservation::builder()
                .instances(
                    Instance::builder()
                        .instance_id("i-0abc")
                        .state(
                            InstanceState::builder()
                                .name(InstanceStateName::Running)
                                .build(),
                        )
                        .build(),
                )
                .build(),
        )
        .build()
}

#[tokio::test(start_paused = true)]
async fn aws_throttling_surfaces_as_throttled_and_holds_back_every_call_until_the_backoff_ends() {
    let describe = mock!(Ec2::describe_instances)
        .sequence()
        .error(|| DescribeInstancesError::generic(aws_error("RequestLimitExceeded")))
        .output(running)
        .repeatedly()
        .build();
    let provider = provider(&[&describe], &[]);
    let node = node("n1", Some(NODE_ID));

    let err = provider.instance_exists(&node).await.unwrap_err();
    // One throttle among five counted calls (four of bias): 20% of 60 s.
    assert!(
        matches!(err, CloudError::Throttled { retry_after } if retry_after == Duration::from_secs(12)),
        "{err:?}"
    );
    assert!(
        metrics(&provider).contains(
            "cloudprovider_aws_api_throttled_requests_total{operation_name=\"DescribeInstances\"} 1"
        ),
        "{}",
        metrics(&provider)
    );

    tokio::time::advance(Duration::from_secs(5)).await;
    let held = provider.instance_exists(&node).await.unwrap_err();
    assert!(
        matches!(held, CloudError::Throttled { retry_after } if retry_after == Duration::from_secs(7)),
        "{held:?}"
    );
    assert_eq!(
        describe.num_calls(),
        1,
        "a held-back call never reaches AWS"
    );

    tokio::time::advance(Duration::from_secs(7)).await;
    assert!(provider.instance_exists(&node).await.expect("backoff over"));
    assert_eq!(describe.num_calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn elbv2_throttling_is_recognised_as_well() {
    let describe = mock!(Elbv2::describe_load_balancers)
        .then_error(|| DescribeLoadBalancersError::generic(aws_error("Throttling")));
    let provider = provider(&[], &[&describe]);
    let service = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("1234".into()),
            annotations: Some(
                [(
                    crate::load_balancer::annotations::TYPE.to_owned(),
                    "nlb".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        ..Service::default()
    };
    let err = provider.get_load_balancer("c", &service).await.unwrap_err();
    assert!(matches!(err, CloudError::Throttled { .. }), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn the_client_side_limit_paces_calls_briefly_and_throttles_before_aws_beyond() {
    let describe = mock!(Ec2::describe_instances).then_output(running);
    let provider = provider_with(
        AwsConfig::default(),
        &[&describe],
        &[],
        RateLimit { qps: 2.0, burst: 2 },
    );
    let node = node("n1", Some(NODE_ID));
    let start = tokio::time::Instant::now();
    provider.instance_exists(&node).await.expect("first token");
    provider.instance_exists(&node).await.expect("second token");
    provider
        .instance_exists(&node)
        .await
        .expect("the third waits half a second for its token");
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(describe.num_calls(), 3);

    // A token further away than the pacing bound is not waited for.
    let describe = mock!(Ec2::describe_instances).then_output(running);
    let provider = provider_with(
        AwsConfig::default(),
        &[&describe],
        &[],
        RateLimit {
            qps: 0.25,
            burst: 1,
        },
    );
    provider.instance_exists(&node).await.expect("first token");
    let start = tokio::time::Instant::now();
    let err = provider.instance_exists(&node).await.unwrap_err();
    assert!(
        matches!(err, CloudError::Throttled { retry_after } if retry_after == Duration::from_secs(4)),
        "{err:?}"
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "failed at once");
    assert_eq!(describe.num_calls(), 1);
    tokio::time::advance(Duration::from_secs(4)).await;
    provider.instance_exists(&node).await.expect("refilled");
    // The client-side limit is not AWS throttling.
    assert!(!metrics(&provider).contains("throttled_requests_total{"));
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_within_the_call() {
    let describe = mock!(Ec2::describe_instances)
        .sequence()
        .error(|| DescribeInstancesError::generic(aws_error("InternalError")))
        .times(2)
        .output(running)
        .build();
    let provider = provider(&[&describe], &[]);
    assert!(
        provider
            .instance_exists(&node("n1", Some(NODE_ID)))
            .await
            .expect("third attempt")
    );
    assert_eq!(describe.num_calls(), 3);
    let metrics = metrics(&provider);
    assert!(
        metrics.contains("cloudprovider_aws_api_request_errors{request=\"describe_instance\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "cloudprovider_aws_api_request_duration_seconds_count{request=\"describe_instance\"} 1"
        ),
        "{metrics}"
    );
}

#[tokio::test(start_paused = true)]
async fn transient_errors_give_up_after_three_attempts() {
    let describe = mock!(Ec2::describe_instances)
        .then_error(|| DescribeInstancesError::generic(aws_error("ServiceUnavailable")));
    let provider = provider(&[&describe], &[]);
    let err = provider
        .instance_exists(&node("n1", Some(NODE_ID)))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::Other { .. }), "{err:?}");
    assert_eq!(describe.num_calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn other_errors_fail_at_once_naming_the_operation_and_code() {
    let describe = mock!(Ec2::describe_instances)
        .then_error(|| DescribeInstancesError::generic(aws_error("UnauthorizedOperation")));
    let provider = provider(&[&describe], &[]);
    let err = provider
        .instance_exists(&node("n1", Some(NODE_ID)))
        .await
        .unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("DescribeInstances failed: UnauthorizedOperation"),
        "{shown}"
    );
    assert_eq!(describe.num_calls(), 1);
}
