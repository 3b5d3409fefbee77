//! Building the EC2, ELB and ELBv2 clients: region, credentials, the
//! `[ServiceOverride]` endpoints with their signing region and name,
//! timeouts, and the request fence each request is described to
//! ([`FenceEachRequest`], with [`query`]). Retries are left to
//! [`crate::api`].

mod query;

use std::collections::HashMap;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_ec2::config::endpoint::{Endpoint, EndpointFuture};
use aws_sdk_ec2::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_ec2::config::retry::RetryConfig;
use aws_sdk_ec2::config::timeout::TimeoutConfig;
use aws_sdk_ec2::config::{
    BehaviorVersion, ConfigBag, Intercept, Region, RuntimeComponents, SharedCredentialsProvider,
};
use aws_sdk_ec2::error::BoxError;
use aws_smithy_types::Document;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::fence::{self, FencedBody, Request};

use crate::config::{AwsConfig, AwsService, ServiceOverride};
use query::QueryRequest;

/// A connection that takes longer than this is a transient failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One attempt of any call; bounds every call so none hangs.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// What the three clients share: region, credentials, no SDK retries, the
/// timeouts.
fn shared(region: &Region, credentials: SharedCredentialsProvider) -> SdkConfig {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .build();
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region.clone())
        .credentials_provider(credentials)
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts)
        .build()
}

/// The EC2 client for `region`.
pub(crate) fn ec2(
    config: &AwsConfig,
    region: &Region,
    credentials: SharedCredentialsProvider,
) -> aws_sdk_ec2::Client {
    let mut builder = aws_sdk_ec2::config::Builder::from(&shared(region, credentials))
        .interceptor(FenceEachRequest);
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
    let mut builder =
        aws_sdk_elasticloadbalancingv2::config::Builder::from(&shared(region, credentials))
            .interceptor(FenceEachRequest);
    if let Some(o) = config.service_override(AwsService::Elbv2, region.as_ref()) {
        builder = builder.endpoint_resolver(FixedEndpoint(endpoint(o, "elasticloadbalancing")));
    }
    aws_sdk_elasticloadbalancingv2::Client::from_conf(builder.build())
}

/// The classic ELB client for `region`; `[ServiceOverride]`s for
/// `elasticloadbalancing` apply to it as to ELBv2 (one endpoint serves both).
pub(crate) fn elb(
    config: &AwsConfig,
    region: &Region,
    credentials: SharedCredentialsProvider,
) -> aws_sdk_elasticloadbalancing::Client {
    let mut builder =
        aws_sdk_elasticloadbalancing::config::Builder::from(&shared(region, credentials))
            .interceptor(FenceEachRequest);
    if let Some(o) = config.service_override(AwsService::Elbv2, region.as_ref()) {
        builder = builder.endpoint_resolver(FixedEndpoint(endpoint(o, "elasticloadbalancing")));
    }
    aws_sdk_elasticloadbalancing::Client::from_conf(builder.build())
}

/// Describes each request to the framework's request fence
/// ([`fence::check_request`]) immediately before it is transmitted, after
/// signing and any wait: a load-balancer operation of a dozen requests
/// stops at the first one that would leave after this process lost its
/// lease; in a dry run each mutation is refused and recorded as the plan
/// (and [`crate::api::Api::change`] carries on past it). The body is
/// handed to the connection as a [`FencedBody`],
/// which asks once more when the connection writes it, so a process frozen
/// between the two (SIGSTOP, a stalled VM) does not send it when it
/// resumes.
///
/// # Guarantees
/// - The operation is the body's `Action`; `Describe*`, `Get*` and `List*`
///   are reads and everything else mutates. A request whose body names no
///   action (none does, on EC2, ELB and ELBv2) is described as a mutation, so a
///   dry run never sends it.
/// - A refusal reaches the caller as a [`FenceRefusal`] in the SDK error's
///   causes, which [`crate::api::Api::call`] answers with, unretried.
#[derive(Debug)]
pub(crate) struct FenceEachRequest;

impl Intercept for FenceEachRequest {
    fn name(&self) -> &'static str {
        "FenceEachRequest"
    }

    fn modify_before_transmit(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        let described = request.body().bytes().and_then(QueryRequest::parse);
        let checked = match &described {
            Some(query) => fence::check_request(query.as_fence_request()),
            None => fence::check_request(Request {
                operation: "an AWS request without an Action",
                mutates: true,
                detail: "",
            }),
        };
        checked.map_err(|refused| BoxError::from(FenceRefusal(refused)))?;
        // Each attempt gets a fresh copy of the signed request, so the
        // in-memory body (every EC2 and ELBv2 call has one) is rewrapped
        // per attempt.
        if let Some(bytes) = request.body().bytes() {
            let fenced = FencedBody::new(Bytes::copy_from_slice(bytes));
            *request.body_mut() = SdkBody::from_body_1_x(fenced);
        }
        Ok(())
    }
}

/// The request fence's refusal of one request, carried through the SDK's
/// error to [`crate::api::Api::call`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FenceRefusal(pub(crate) CloudError);

impl FenceRefusal {
    /// The fence's error, if the fence refused the request `err` is about
    /// (anywhere in its chain of causes).
    pub(crate) fn find(err: &(dyn std::error::Error + 'static)) -> Option<CloudError> {
        let mut next = Some(err);
        while let Some(err) = next {
            if let Some(refusal) = err.downcast_ref::<Self>() {
                return Some(refusal.0.clone());
            }
            next = err.source();
        }
        None
    }
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

impl aws_sdk_elasticloadbalancing::config::endpoint::ResolveEndpoint for FixedEndpoint {
    fn resolve_endpoint<'a>(
        &'a self,
        _params: &'a aws_sdk_elasticloadbalancing::config::endpoint::Params,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use aws_sdk_ec2::config::Credentials;
    use aws_sdk_ec2::error::DisplayErrorContext;
    use ccm_cloud_provider::CloudError;
    use ccm_cloud_provider::fence::{Countdown, RequestFence, scope};
    use ccm_test_support::RecordingListener;

    use super::*;
    use crate::api::{Api, ApiError};
    use crate::metrics::ApiMetrics;
    use crate::test_util::dry_run::DryRun;
    use crate::throttle::{RateLimits, Throttle};

    /// How long the wire may take to show what a client sent.
    const WIRE_WAIT: Duration = Duration::from_secs(10);

    #[derive(Debug)]
    struct LostTheLease;

    impl RequestFence for LostTheLease {
        fn check(&self) -> Result<(), String> {
            Err("lost the lease".into())
        }
    }

    /// A loopback listener that counts connections and drops them.
    async fn listener() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        (url, accepted)
    }

    fn ec2_at(url: &str) -> aws_sdk_ec2::Client {
        let credentials = Credentials::new("AKID", "SECRET", None, None, "test");
        let shared = shared(
            &Region::new("us-east-1"),
            SharedCredentialsProvider::new(credentials),
        );
        aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&shared)
                .endpoint_url(url)
                .interceptor(FenceEachRequest)
                .build(),
        )
    }

    #[tokio::test]
    async fn a_request_the_fence_refuses_never_leaves_the_process() {
        let (url, accepted) = listener().await;
        let ec2 = ec2_at(&url);
        let refused = scope(Arc::new(LostTheLease), ec2.describe_instances().send())
            .await
            .unwrap_err();
        let text = DisplayErrorContext(&refused).to_string();
        assert!(text.contains("lost the lease"), "{text}");
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing was sent");

        // Outside a fence scope the same request is sent (and fails here).
        let _ = ec2.describe_instances().send().await;
        assert!(accepted.load(Ordering::SeqCst) >= 1, "the request was sent");
    }

    #[tokio::test]
    async fn a_request_whose_lease_lapses_before_its_body_is_written_never_completes() {
        let wire = RecordingListener::start().await.unwrap();
        let ec2 = ec2_at(&wire.url);
        // The interceptor's check passes; the body's, when the connection
        // writes it (a process frozen in between, say), refuses.
        let fence = Arc::new(Countdown::new(1));
        let refused = scope(
            fence.clone(),
            ec2.create_route()
                .route_table_id("rtb-1")
                .destination_cidr_block("10.244.1.0/24")
                .instance_id("i-1")
                .send(),
        )
        .await
        .unwrap_err();
        assert_eq!(fence.asked(), 2, "asked twice");
        let text = DisplayErrorContext(&refused).to_string();
        assert!(text.contains("the lease lapsed"), "{text}");
        // Once the client has closed the connection, nothing more arrives.
        wire.closed(1, WIRE_WAIT).await.unwrap();
        let bytes = wire.received();
        assert!(
            !bytes.contains("Action=CreateRoute"),
            "the body never reached the wire: {bytes}"
        );

        // Allowed, the same request carries its body (never answered here).
        let allowed = Arc::new(Countdown::new(2));
        let send = scope(
            allowed,
            ec2.create_route()
                .route_table_id("rtb-1")
                .destination_cidr_block("10.244.1.0/24")
                .instance_id("i-1")
                .send(),
        );
        tokio::select! {
            _ = send => panic!("the recording listener never answers"),
            arrived = wire.received_containing("Action=CreateRoute", WIRE_WAIT) => arrived.unwrap(),
        }
    }

    fn api_at(url: &str, ec2: &aws_sdk_ec2::Client) -> Api {
        let elbv2 = aws_sdk_elasticloadbalancingv2::Client::from_conf(
            aws_sdk_elasticloadbalancingv2::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new("us-east-1"))
                .endpoint_url(url)
                .credentials_provider(Credentials::new("AKID", "SECRET", None, None, "test"))
                .build(),
        );
        let elb = aws_sdk_elasticloadbalancing::Client::from_conf(
            aws_sdk_elasticloadbalancing::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new("us-east-1"))
                .endpoint_url(url)
                .credentials_provider(Credentials::new("AKID", "SECRET", None, None, "test"))
                .build(),
        );
        Api::new(
            (ec2.clone(), elb, elbv2),
            Arc::new(Throttle::new(RateLimits::default()).unwrap()),
            Arc::new(ApiMetrics::default()),
        )
    }

    #[tokio::test]
    async fn a_fenced_api_call_is_neither_attempted_nor_retried() {
        let (url, accepted) = listener().await;
        let ec2 = ec2_at(&url);
        let api = api_at(&url, &ec2);
        let attempts = AtomicUsize::new(0);
        let err = scope(
            Arc::new(LostTheLease),
            api.call("DescribeInstances", || {
                attempts.fetch_add(1, Ordering::SeqCst);
                ec2.describe_instances().send()
            }),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ApiError::Fenced { .. }), "{err:?}");
        assert_eq!(attempts.load(Ordering::SeqCst), 0);
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        assert_eq!(CloudError::from(err).kind(), "retry");
    }

    #[tokio::test]
    async fn a_dry_run_sends_reads_and_plans_a_mutation_as_a_fenced_error_never_retried() {
        let (url, accepted) = listener().await;
        let ec2 = ec2_at(&url);
        let api = api_at(&url, &ec2);
        let fence = Arc::new(DryRun::default());
        let attempts = AtomicUsize::new(0);
        let err = scope(
            fence.clone(),
            api.call("CreateRoute", || {
                attempts.fetch_add(1, Ordering::SeqCst);
                ec2.create_route()
                    .route_table_id("rtb-1")
                    .destination_cidr_block("10.244.1.0/24")
                    .instance_id("i-1")
                    .send()
            }),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ApiError::Fenced { .. }), "{err:?}");
        assert_eq!(attempts.load(Ordering::SeqCst), 1, "refused, not retried");
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing was sent");
        let planned = fence.planned();
        assert_eq!(planned.len(), 1, "{planned:?}");
        assert_eq!(planned[0].operation, "CreateRoute");
        for argument in [
            "RouteTableId=rtb-1",
            "DestinationCidrBlock=10.244.1.0/24",
            "InstanceId=i-1",
        ] {
            assert!(
                planned[0].detail.split(' ').any(|word| word == argument),
                "{argument} in {:?}",
                planned[0].detail
            );
        }
        assert!(!planned[0].detail.contains("Version="), "{planned:?}");
        let err = CloudError::from(err);
        assert_eq!(err.kind(), "retry");
        assert!(err.to_string().contains("CreateRoute"), "{err}");

        // A read is described and sent (and fails here, on a dropped
        // connection).
        let _ = scope(fence.clone(), ec2.describe_instances().send()).await;
        assert!(accepted.load(Ordering::SeqCst) >= 1, "the read was sent");
        let reads: Vec<String> = fence.reads().into_iter().map(|r| r.operation).collect();
        assert_eq!(reads, ["DescribeInstances"]);
        assert_eq!(fence.planned().len(), 1, "a read is not planned");
    }
}
