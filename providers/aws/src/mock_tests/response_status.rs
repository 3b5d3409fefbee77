//! `cloudprovider_aws_api_response_status_total` against mocked EC2 and
//! ELBv2 answering with real HTTP error responses: each call that ends in
//! an error status counts once, after its retries, under the SDK's service
//! ID, as upstream v1.37+.

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_elasticloadbalancingv2::Client as Elbv2;
use aws_smithy_mocks::mock;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, Instances, LoadBalancer};

use super::*;

const NODE_ID: &str = "aws:///us-east-1a/i-0abc";

/// An EC2 (`ec2Query`) error body.
fn ec2_error(code: &str) -> Option<String> {
    Some(format!(
        "<Response><Errors><Error><Code>{code}</Code><Message>{code} (scripted)</Message></Error></Errors><RequestID>r-1</RequestID></Response>"
    ))
}

/// An ELBv2 (`awsQuery`) error body.
fn elbv2_error(code: &str) -> Option<String> {
    Some(format!(
        "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{code} (scripted)</Message></Error><RequestId>r-1</RequestId></ErrorResponse>"
    ))
}

/// The sample for `service`'s `operation` ending in `status`, if any.
fn status_sample(
    provider: &AwsProvider,
    service: &str,
    operation: &str,
    status: u16,
) -> Option<String> {
    let prefix = format!(
        "cloudprovider_aws_api_response_status_total{{service=\"{service}\",operation=\"{operation}\",status_code=\"{status}\"}} "
    );
    metrics(provider)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
}

#[tokio::test(start_paused = true)]
async fn a_call_that_ends_in_an_error_status_counts_once_after_its_retries() {
    let describe = mock!(Ec2::describe_instances)
        .sequence()
        .http_status(503, ec2_error("ServiceUnavailable"))
        .repeatedly()
        .build();
    let provider = provider(&[&describe], &[]);
    let err = provider
        .instance_exists(&node("n1", Some(NODE_ID)))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::Other { .. }), "{err:?}");
    assert_eq!(describe.num_calls(), 3, "retried");
    assert_eq!(
        status_sample(&provider, "EC2", "DescribeInstances", 503).as_deref(),
        Some("1"),
        "{}",
        metrics(&provider)
    );

    let refused = mock!(Ec2::describe_instances)
        .sequence()
        .http_status(403, ec2_error("UnauthorizedOperation"))
        .repeatedly()
        .build();
    let provider = super::provider(&[&refused], &[]);
    provider
        .instance_exists(&node("n1", Some(NODE_ID)))
        .await
        .unwrap_err();
    assert_eq!(
        status_sample(&provider, "EC2", "DescribeInstances", 403).as_deref(),
        Some("1"),
        "{}",
        metrics(&provider)
    );
}

#[tokio::test(start_paused = true)]
async fn an_error_a_retry_recovers_from_is_not_counted() {
    let describe = mock!(Ec2::describe_instances)
        .sequence()
        .http_status(503, ec2_error("ServiceUnavailable"))
        .times(2)
        .output(|| {
            aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput::builder().build()
        })
        .build();
    let provider = provider(&[&describe], &[]);
    provider
        .instance_exists(&node("n1", Some(NODE_ID)))
        .await
        .expect("the third attempt answers");
    assert_eq!(describe.num_calls(), 3);
    assert!(
        !metrics(&provider).contains("response_status_total{"),
        "{}",
        metrics(&provider)
    );
}

#[tokio::test(start_paused = true)]
async fn a_throttled_elbv2_call_counts_under_its_service() {
    let describe = mock!(Elbv2::describe_load_balancers)
        .sequence()
        .http_status(400, elbv2_error("Throttling"))
        .repeatedly()
        .build();
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
    assert_eq!(describe.num_calls(), 1);
    assert_eq!(
        status_sample(
            &provider,
            "Elastic Load Balancing v2",
            "DescribeLoadBalancers",
            400
        )
        .as_deref(),
        Some("1"),
        "{}",
        metrics(&provider)
    );
    // Held back by the backoff that throttle started: never sent, not counted.
    let held = provider.get_load_balancer("c", &service).await.unwrap_err();
    assert!(matches!(held, CloudError::Throttled { .. }), "{held:?}");
    assert_eq!(describe.num_calls(), 1);
    assert_eq!(
        status_sample(
            &provider,
            "Elastic Load Balancing v2",
            "DescribeLoadBalancers",
            400
        )
        .as_deref(),
        Some("1")
    );
}
