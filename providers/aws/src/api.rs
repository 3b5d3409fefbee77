//! Every AWS call goes through [`Api::call`]: admission by the throttle,
//! latency and error metrics, a short retry of transient failures, and one
//! error type that knows AWS's error code.
//!
//! The SDK's own retries are off: they would sleep through throttling, which
//! the interface wants surfaced as `CloudError::Throttled` instead.
//!
//! A call that ends in an HTTP error status, once its retries are over, is
//! counted once under that status (upstream's v1.37+
//! `cloudprovider_aws_api_response_status_total`, recorded before the
//! SDK's retry step): a transient error a retry recovers from is not, and
//! neither is a call that got no answer (held back by the throttle or the
//! fence, a timeout). A call AWS throttles ends there, where upstream's
//! SDK would retry it a few times first, so it is counted.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{BoxError, DisplayErrorContext, ProvideErrorMetadata, SdkError};
use ccm_cloud_provider::CloudError;
use tokio::time::Instant;

use crate::clients::FenceRefusal;
use crate::metrics::ApiMetrics;
use crate::throttle::{MAX_PACING_WAIT, Throttle};

/// Attempts per call when AWS answers with a transient error.
const ATTEMPTS: u32 = 3;

/// A bound on the pages of one paged call, so a misbehaving endpoint cannot
/// loop us.
pub(crate) const MAX_PAGES: usize = 100;
/// Delay before the first retry; doubled for each further one.
const RETRY_DELAY: Duration = Duration::from_millis(200);

/// Error codes AWS uses to say "slow down".
const THROTTLING_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "EC2ThrottledException",
];

/// Error codes for failures on AWS's side that a retry may not see.
const TRANSIENT_CODES: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Error codes AWS uses to say an account limit is reached: the call is
/// refused until a resource goes or the quota is raised.
const QUOTA_CODES: &[&str] = &[
    "TooManyLoadBalancers",
    "TooManyTargetGroups",
    "TooManyListeners",
    "TooManyTargets",
    "TooManyTags",
    "TooManyRules",
    "LimitExceeded",
    "ResourceLimitExceeded",
    "RulesPerSecurityGroupLimitExceeded",
    "SecurityGroupLimitExceeded",
];

/// A failed AWS call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// AWS throttled the call, or the client-side limit or the process-wide
    /// backoff held it back.
    #[error("{operation} throttled; retry after {retry_after:?}")]
    Throttled {
        /// The API operation.
        operation: &'static str,
        /// How long every call should wait.
        retry_after: Duration,
    },
    /// AWS answered with an error.
    #[error("{operation} failed: {code}: {message}")]
    Service {
        /// The API operation.
        operation: &'static str,
        /// AWS's error code, such as `InvalidInstanceID.NotFound`.
        code: String,
        /// AWS's message.
        message: String,
        /// The SDK error.
        #[source]
        source: BoxError,
    },
    /// The framework's request fence refused: this process may no longer
    /// change the cloud, or a dry run plans this request instead of sending
    /// it (see [`ccm_cloud_provider::fence`]).
    #[error("{operation} not sent: {source}")]
    Fenced {
        /// The API operation.
        operation: &'static str,
        /// The fence's answer, which the caller gets as it is.
        #[source]
        source: CloudError,
    },
    /// No answer from AWS: connection, timeout, unreadable response.
    #[error("{operation} failed: {detail}")]
    Transport {
        /// The API operation.
        operation: &'static str,
        /// The SDK's account of the failure.
        detail: String,
        /// The SDK error.
        #[source]
        source: BoxError,
    },
}

impl ApiError {
    /// AWS's error code, for service errors.
    pub(crate) fn code(&self) -> Option<&str> {
        match self {
            Self::Service { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether AWS answered with `code`.
    pub(crate) fn is(&self, code: &str) -> bool {
        self.code() == Some(code)
    }
}

/// AWS's throttling is [`CloudError::Throttled`], a quota reached
/// ([`QUOTA_CODES`]) [`CloudError::QuotaExceeded`], the fence's refusal
/// what the fence said; anything else [`CloudError::Other`].
impl From<ApiError> for CloudError {
    fn from(err: ApiError) -> Self {
        let message = err.to_string();
        match err {
            ApiError::Throttled { retry_after, .. } => CloudError::Throttled { retry_after },
            ApiError::Fenced { source, .. } => source,
            ApiError::Service { code, .. } if QUOTA_CODES.contains(&code.as_str()) => {
                CloudError::QuotaExceeded { message }
            }
            // The message already says what `ApiError` would: keep the SDK's
            // error as the cause.
            ApiError::Service { source, .. } | ApiError::Transport { source, .. } => {
                CloudError::other(message, source)
            }
        }
    }
}

/// The SDK clients with the admission and accounting every call shares.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub(crate) ec2: aws_sdk_ec2::Client,
    /// Classic ELBs.
    pub(crate) elb: aws_sdk_elasticloadbalancing::Client,
    pub(crate) elbv2: aws_sdk_elasticloadbalancingv2::Client,
    throttle: Arc<Throttle>,
    metrics: Arc<ApiMetrics>,
}

/// How a failed attempt is handled.
enum Failure {
    Throttled,
    Transient,
    Final,
}

impl Api {
    pub(crate) fn new(
        (ec2, elb, elbv2): (
            aws_sdk_ec2::Client,
            aws_sdk_elasticloadbalancing::Client,
            aws_sdk_elasticloadbalancingv2::Client,
        ),
        throttle: Arc<Throttle>,
        metrics: Arc<ApiMetrics>,
    ) -> Self {
        Self {
            ec2,
            elb,
            elbv2,
            throttle,
            metrics,
        }
    }

    /// Every item of a paged describe call, following its continuation
    /// token (`NextToken` or `Marker`) for at most [`MAX_PAGES`] pages; each
    /// page is one [`Api::call`]. `split` takes a page apart into its items
    /// and the next token.
    pub(crate) async fn paged<P, T, E, F, Fut>(
        &self,
        operation: &'static str,
        send: F,
        split: impl Fn(&P) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>, ApiError>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<P, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self.call(operation, || send(token.clone())).await?;
            let (items, next) = split(&page);
            out.extend(items);
            token = next.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// [`Api::call`] for a request that changes AWS: `None` when a dry run
    /// planned it instead of sending it (the request fence recorded it), so
    /// the caller goes on as though it had been made and the plan holds
    /// every change the ensure would make, not only the first. A create's
    /// caller then stands its resource in by [`planned_id`].
    ///
    /// # Errors
    /// As [`Api::call`], apart from a dry run's refusal.
    pub(crate) async fn change<T, E, F, Fut>(
        &self,
        operation: &'static str,
        send: F,
    ) -> Result<Option<T>, ApiError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match self.call(operation, send).await {
            Ok(output) => Ok(Some(output)),
            // In a dry run only a mutation is ever refused: the check
            // before each attempt passes, and the fence lets reads out.
            Err(ApiError::Fenced { .. }) if ccm_cloud_provider::fence::dry_run() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Makes one API call: `send` builds and sends the request, and is
    /// called again for each retry of a transient failure.
    ///
    /// # Errors
    /// [`ApiError::Fenced`], never retried, when the request fence refuses
    /// (before an attempt, or the interceptor as the request leaves);
    /// [`ApiError::Throttled`] without calling AWS when the throttle holds
    /// the call back, or when AWS throttles it; otherwise AWS's error.
    pub(crate) async fn call<T, E, F, Fut>(
        &self,
        operation: &'static str,
        send: F,
    ) -> Result<T, ApiError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let mut attempt = 1;
        loop {
            // Each attempt waits for the rate limit (briefly: see
            // `throttle`), then asks the request fence whether anything may
            // be sent; the clients' interceptor asks again just before
            // transmitting, describing the request, and only it can tell a
            // dry run's reads, which pass, from its mutations.
            let admitted = self.throttle.admit_within(operation, MAX_PACING_WAIT).await;
            ccm_cloud_provider::fence::check()
                .map_err(|source| ApiError::Fenced { operation, source })?;
            if let Err(retry_after) = admitted {
                tracing::debug!(
                    operation,
                    ?retry_after,
                    "AWS call held back by the throttle"
                );
                return Err(ApiError::Throttled {
                    operation,
                    retry_after,
                });
            }
            let started = Instant::now();
            let err = match send().await {
                Ok(output) => {
                    self.metrics.succeeded(operation, started.elapsed());
                    return Ok(output);
                }
                Err(err) => err,
            };
            // Refused by the interceptor (nothing was sent), or leadership
            // lost meanwhile: no retry.
            if let Some(source) = FenceRefusal::find(&err) {
                return Err(ApiError::Fenced { operation, source });
            }
            self.metrics.failed(operation);
            let failure = classify(&err);
            let retried = matches!(failure, Failure::Transient) && attempt < ATTEMPTS;
            if let (false, Some(status)) = (retried, error_status(&err)) {
                self.metrics
                    .ended_in_status(service_id::<E>(), operation, status);
            }
            ccm_cloud_provider::fence::check()
                .map_err(|source| ApiError::Fenced { operation, source })?;
            match failure {
                Failure::Throttled => {
                    self.metrics.throttled(operation);
                    let retry_after = self.throttle.throttled();
                    tracing::warn!(operation, ?retry_after, "AWS throttled a request");
                    return Err(ApiError::Throttled {
                        operation,
                        retry_after,
                    });
                }
                Failure::Transient if attempt < ATTEMPTS => {
                    let delay = RETRY_DELAY * 2u32.pow(attempt - 1);
                    tracing::debug!(operation, attempt, error = %DisplayErrorContext(&err), "retrying transient AWS error");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Failure::Transient | Failure::Final => return Err(into_api_error(operation, err)),
            }
        }
    }
}

/// What a dry run answers for a request it planned instead of sending:
/// the identifier a created resource stands under in the rest of the plan
/// (`planned:target-group/k8s-default-web-1a2b3c4d5e`), which no AWS
/// identifier looks like, so a read of it can be skipped.
pub(crate) fn planned_id(kind: &str, name: &str) -> String {
    format!("{PLANNED}{kind}/{name}")
}

/// Whether `id` names a resource a dry run planned to create.
pub(crate) fn is_planned(id: &str) -> bool {
    id.starts_with(PLANNED)
}

const PLANNED: &str = "planned:";

fn classify<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> Failure {
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => Failure::Transient,
        SdkError::ResponseError(r) if r.raw().status().is_server_error() => Failure::Transient,
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default();
            if THROTTLING_CODES.contains(&code) {
                Failure::Throttled
            } else if TRANSIENT_CODES.contains(&code)
                || (code.is_empty() && service.raw().status().is_server_error())
            {
                Failure::Transient
            } else {
                Failure::Final
            }
        }
        _ => Failure::Final,
    }
}

/// The HTTP status of AWS's answer, when it is an error status.
fn error_status<E>(err: &SdkError<E, HttpResponse>) -> Option<u16> {
    err.raw_response()
        .map(|r| r.status().as_u16())
        .filter(|status| *status >= 400)
}

/// The SDK service ID (upstream's `service` label, from the Go SDK's
/// `ServiceID`, the models' `sdkId` both SDKs share) of the client whose
/// operation fails with `E`: known from the crate that defines `E`.
fn service_id<E>() -> &'static str {
    let path = std::any::type_name::<E>();
    match path.split("::").next().unwrap_or_default() {
        "aws_sdk_ec2" => "EC2",
        "aws_sdk_elasticloadbalancing" => "Elastic Load Balancing",
        "aws_sdk_elasticloadbalancingv2" => "Elastic Load Balancing v2",
        _ => "",
    }
}

fn into_api_error<E>(operation: &'static str, err: SdkError<E, HttpResponse>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match &err {
        SdkError::ServiceError(service) => ApiError::Service {
            operation,
            code: service.err().code().unwrap_or("Unknown").to_owned(),
            message: service.err().message().unwrap_or_default().to_owned(),
            source: Box::new(err),
        },
        _ => ApiError::Transport {
            operation,
            detail: DisplayErrorContext(&err).to_string(),
            source: Box::new(err),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operations `source` sends through `.call("Operation"`.
    fn called(source: &str) -> Vec<&str> {
        source
            .split(".call(\"")
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(operation, _)| operation))
            .collect()
    }

    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_mutation_goes_through_change_so_a_dry_run_plans_past_it() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut through_call = Vec::new();
        let mut reads = 0;
        // What ships: not the test harness, nor the tests at a file's end.
        let shipped = files.iter().filter(|f| {
            let path = f.to_string_lossy();
            !path.contains("mock_tests") && !path.contains("test_util")
        });
        for file in shipped {
            let source = std::fs::read_to_string(file).expect("readable");
            let source = source.split("#[cfg(test)]").next().unwrap_or_default();
            for operation in called(source) {
                if ["Describe", "Get", "List"]
                    .iter()
                    .any(|r| operation.starts_with(r))
                {
                    reads += 1;
                } else {
                    through_call.push(format!("{}: {operation}", file.display()));
                }
            }
        }
        assert!(reads > 10, "the scan finds the reads: {reads}");
        assert_eq!(
            through_call,
            Vec::<String>::new(),
            "mutations sent with `call`"
        );
        assert_eq!(called(r#"api.call("CreateRoute", || x)"#), ["CreateRoute"]);
    }

    #[test]
    fn service_ids_are_the_sdks_as_upstream_labels_them() {
        use aws_sdk_ec2::operation::create_tags::CreateTagsError;
        use aws_sdk_elasticloadbalancing::operation::describe_load_balancers::DescribeLoadBalancersError as ElbError;
        use aws_sdk_elasticloadbalancingv2::operation::describe_load_balancers::DescribeLoadBalancersError as Elbv2Error;

        assert_eq!(service_id::<CreateTagsError>(), "EC2");
        assert_eq!(service_id::<ElbError>(), "Elastic Load Balancing");
        assert_eq!(service_id::<Elbv2Error>(), "Elastic Load Balancing v2");
    }

    fn refused(code: &str) -> ApiError {
        ApiError::Service {
            operation: "CreateLoadBalancer",
            code: code.to_owned(),
            message: "Exceeded quota of account 123456789012".to_owned(),
            source: Box::new(std::io::Error::other("scripted")),
        }
    }

    #[test]
    fn an_account_limit_is_a_quota_exceeded_and_other_refusals_are_not() {
        for code in QUOTA_CODES {
            match CloudError::from(refused(code)) {
                CloudError::QuotaExceeded { message } => assert_eq!(
                    message,
                    format!(
                        "CreateLoadBalancer failed: {code}: Exceeded quota of account 123456789012"
                    )
                ),
                other => panic!("{code}: {other:?}"),
            }
        }
        let err = CloudError::from(refused("ValidationError"));
        assert!(matches!(err, CloudError::Other { .. }), "{err:?}");
        assert_eq!(err.kind(), "error");
    }
}
