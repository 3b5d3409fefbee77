//! Provider behaviour moto cannot produce — throttling, retries, target
//! health states, security groups AWS will not delete yet, malformed IDs,
//! blackhole routes — against clients whose answers the tests script with
//! aws-smithy-mocks. A call no rule answers panics, so a test also proves
//! which calls were not made.

mod instances;
mod load_balancers;
mod provider_controllers;
mod response_status;
mod routes;
mod target_health;
mod throttling;
mod topology;

use std::sync::Arc;

use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::error::ErrorMetadata;
use aws_smithy_mocks::{Rule, RuleMode, mock_client};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::{AwsConfig, AwsProvider, RateLimit};

/// A limit no test reaches unless it means to.
const GENEROUS: RateLimit = RateLimit {
    qps: 10_000.0,
    burst: 10_000,
};

fn provider(ec2: &[&Rule], elbv2: &[&Rule]) -> AwsProvider {
    provider_with(AwsConfig::default(), ec2, elbv2, GENEROUS)
}

fn provider_with(
    config: AwsConfig,
    ec2: &[&Rule],
    elbv2: &[&Rule],
    limit: RateLimit,
) -> AwsProvider {
    provider_with_classic(config, ec2, &[], elbv2, limit)
}

/// As [`provider_with`], with `elb`'s rules answering classic ELB calls.
fn provider_with_classic(
    config: AwsConfig,
    ec2: &[&Rule],
    elb: &[&Rule],
    elbv2: &[&Rule],
    limit: RateLimit,
) -> AwsProvider {
    // As in production, the SDK does not retry: the provider decides.
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, ec2, |b| b
        .retry_config(RetryConfig::disabled()));
    let elbv2 = mock_client!(
        aws_sdk_elasticloadbalancingv2,
        RuleMode::MatchAny,
        elbv2,
        |b| b.retry_config(RetryConfig::disabled())
    );
    // Without rules, a classic ELB call fails the test.
    let elb = mock_client!(aws_sdk_elasticloadbalancing, RuleMode::MatchAny, elb, |b| b
        .retry_config(RetryConfig::disabled()));
    AwsProvider::with_clients(config, (ec2, elb, elbv2), limit)
}

/// An AWS error with `code`, as the SDK reports codes it has no type for.
fn aws_error(code: &str) -> ErrorMetadata {
    ErrorMetadata::builder()
        .code(code)
        .message(format!("{code} (scripted)"))
        .build()
}

fn node(name: &str, provider_id: Option<&str>) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        ..Node::default()
    })
}

fn metrics(provider: &AwsProvider) -> String {
    let mut out = String::new();
    ccm_cloud_provider::CloudProvider::encode_metrics(provider, &mut out);
    out
}
