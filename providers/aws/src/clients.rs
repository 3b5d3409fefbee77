//! Building the EC2 and ELBv2 clients: region, credentials, the
//! `[ServiceOverride]` endpoints with their signing region and name, and
//! timeouts. Retries are left to [`crate::api`].

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_ec2::config::endpoint::{Endpoint, EndpointFuture};
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::{BehaviorVersion, Region, SharedCredentialsProvider};
use aws_smithy_types::Document;

use crate::config::{AwsConfig, AwsService, ServiceOverride};

/// A connection that takes longer than this is a transient failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One attempt of any call; bounds every call so none hangs.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .build()
}

/// The EC2 client for `region`.
pub(crate) fn ec2(
    config: &AwsConfig,
    region: &Region,
    credentials: SharedCredentialsProvider,
) -> aws_sdk_ec2::Client {
    let mut builder = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region.clone())
        .credentials_provider(credentials)
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts());
    if let Some(o) = config.service_override(AwsService::Ec2, region.as_ref()) {
        builder = builder.endpoint_resolver(FixedEndpoint(endpoint(o, "ec2")));
    }
    aws_sdk_ec2::Client::from_conf(builder.build())
}

/// The ELBv2 client for `region`.
pub(crate) fn elbv2(
    config: &AwsConfig,
    region: &Region,
    credentials: SharedCredentialsProvider,
) -> aws_sdk_elasticloadbalancingv2::Client {
    let mut builder = aws_sdk_elasticloadbalancingv2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region.clone())
        .credentials_provider(credentials)
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts());
    if let Some(o) = config.service_override(AwsService::Elbv2, region.as_ref()) {
        builder = builder.endpoint_resolver(FixedEndpoint(endpoint(o, "elasticloadbalancing")));
    }
    aws_sdk_elasticloadbalancingv2::Client::from_conf(builder.build())
}

/// The override's URL, signed for its `SigningRegion` and `SigningName`
/// (the SDK reads both from the endpoint's `authSchemes` property).
fn endpoint(o: &ServiceOverride, signing_name: &str) -> Endpoint {
    let scheme = HashMap::from([
        ("name".to_owned(), Document::from("sigv4")),
        (
            "signingRegion".to_owned(),
            Document::from(o.signing_region.as_str()),
        ),
        (
            "signingName".to_owned(),
            Document::from(o.signing_name.as_deref().unwrap_or(signing_name)),
        ),
    ]);
    Endpoint::builder()
        .url(o.url.clone())
        .property("authSchemes", vec![Document::from(scheme)])
        .build()
}

/// An endpoint resolver that always answers with the override.
#[derive(Debug)]
struct FixedEndpoint(Endpoint);

impl aws_sdk_ec2::config::endpoint::ResolveEndpoint for FixedEndpoint {
    fn resolve_endpoint<'a>(
        &'a self,
        _params: &'a aws_sdk_ec2::config::endpoint::Params,
    ) -> EndpointFuture<'a> {
        EndpointFuture::ready(Ok(self.0.clone()))
    }
}

impl aws_sdk_elasticloadbalancingv2::config::endpoint::ResolveEndpoint for FixedEndpoint {
    fn resolve_endpoint<'a>(
        &'a self,
        _params: &'a aws_sdk_elasticloadbalancingv2::config::endpoint::Params,
    ) -> EndpointFuture<'a> {
        EndpointFuture::ready(Ok(self.0.clone()))
    }
}
