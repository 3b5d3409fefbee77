//! A loopback HTTP proxy in front of moto that counts the AWS requests it
//! is sent and, while told to, answers every one as AWS answers rate
//! limiting: EC2's `RequestLimitExceeded` (503) and ELBv2's `Throttling`
//! (400), each with its service's XML error body.
//!
//! Point a provider's `[ServiceOverride]` URLs at [`Proxy::endpoint`]
//! ([`super::cloud_config_at`]); seed and inspect moto with
//! [`super::ec2`] and [`super::elbv2`], which go to moto directly and so are
//! not counted.
//!
//! # Guarantees
//! - A request is counted once its body has arrived, before it is answered,
//!   so a test that drops a call as soon as the count moves has sent it.
//! - A forwarded request is finished by moto even when the client goes
//!   away before the answer, as a real endpoint finishes it.
//! - Nothing is forwarded anywhere but to the upstream given to
//!   [`Proxy::start`], without any HTTP proxy from the environment.
//! - Every request is logged with its action and arrival time
//!   ([`Proxy::calls`]); an action moto does not serve (a 500 where AWS
//!   answers) is answered by the proxy as AWS answers it, and logged so
//!   ([`ANSWERED_HERE`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::Error;

/// How long moto may take to answer one forwarded request.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);

/// Headers that describe one hop, not the message: never passed on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "content-length",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The AWS service a request is for, as far as the throttled answer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Ec2,
    Elbv2,
}

/// Actions moto answers with a 500 that the proxy answers as AWS does
/// for an estate like the harness's: `DescribeInstanceTopology` (no
/// instance has a topology: an empty set).
pub const ANSWERED_HERE: &[&str] = &["DescribeInstanceTopology"];

/// One request the proxy was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The query protocol's `Action` (`DescribeInstances`), or `?` when
    /// the body names none.
    pub action: String,
    /// The API it belongs to, from the form body's `Version`: `EC2`,
    /// `ELB` (classic), `ELBv2` or `STS`; `?` when the version is unknown.
    pub api: &'static str,
    /// When its body had arrived.
    pub at: Instant,
    /// Whether the proxy answered it itself ([`ANSWERED_HERE`]).
    pub answered_here: bool,
    /// Its `x-amz-source-*` headers (sent when assuming a role), by name.
    pub source_headers: BTreeMap<String, String>,
}

/// What every connection's handler shares.
#[derive(Debug)]
struct Shared {
    upstream: String,
    client: reqwest::Client,
    requests: AtomicU64,
    throttled: AtomicBool,
    calls: Mutex<Vec<Call>>,
    /// Answers that were not a success, as `Action Code` (`CreateRoute
    /// RouteAlreadyExists`; the HTTP status when the body names no code).
    failures: Mutex<Vec<String>>,
}

/// The proxy: listening on 127.0.0.1 until dropped.
#[derive(Debug)]
pub struct Proxy {
    /// `http://127.0.0.1:<port>`: the endpoint to give the provider.
    pub endpoint: String,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `upstream` (`http://host:port`, no trailing `/`)
    /// on a free loopback port, serving on the current tokio runtime.
    ///
    /// # Errors
    /// [`Error::Io`] when no loopback port can be bound, or no HTTP client
    /// can be built.
    pub async fn start(upstream: &str) -> Result<Self, Error> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(super::io("binding the AWS proxy"))?;
        let address = listener
            .local_addr()
            .map_err(super::io("reading the AWS proxy's address"))?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(FORWARD_TIMEOUT)
            .build()
            .map_err(|e| Error::Io {
                what: "building the AWS proxy's client".into(),
                source: std::io::Error::other(e),
            })?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client,
            requests: AtomicU64::new(0),
            throttled: AtomicBool::new(false),
            calls: Mutex::new(Vec::new()),
            failures: Mutex::new(Vec::new()),
        });
        let accept = tokio::spawn(accept(listener, shared.clone()));
        Ok(Self {
            endpoint: format!("http://{address}"),
            shared,
            accept,
        })
    }

    /// How many requests the proxy has been sent, whatever their answer.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Every request so far, in the order they arrived.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().clone()
    }

    /// How many requests of `action` (`DescribeInstances`) the proxy has
    /// been sent.
    pub fn count(&self, action: &str) -> u64 {
        self.actions().get(action).copied().unwrap_or(0)
    }

    /// Requests by action so far.
    pub fn actions(&self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        for call in self.shared.calls.lock().iter() {
            *by.entry(call.action.clone()).or_default() += 1;
        }
        by
    }

    /// The answers that were not a success, by `Action Code`: what a call
    /// that changed nothing bought (a retry, a race lost to another writer).
    pub fn failures(&self) -> BTreeMap<String, u64> {
        let mut by = BTreeMap::new();
        for failure in self.shared.failures.lock().iter() {
            *by.entry(failure.clone()).or_default() += 1;
        }
        by
    }

    /// The answers that were not a success, in the order they came, as
    /// `Action Code`.
    pub fn failure_log(&self) -> Vec<String> {
        self.shared.failures.lock().clone()
    }

    /// While `on`, every request is answered as throttled and none reaches
    /// moto.
    pub fn set_throttled(&self, on: bool) {
        self.shared.throttled.store(on, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(shared.clone(), request));
            // A client that goes away mid-request ends its connection; the
            // request itself is finished by its own task.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(plain(
                StatusCode::BAD_REQUEST,
                format!("reading the body: {e}"),
            ));
        }
    };
    let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let action = action(&body);
    let answered_here = ANSWERED_HERE.contains(&action.as_str());
    let source_headers = parts
        .headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-amz-source-"))
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    shared.calls.lock().push(Call {
        action: action.clone(),
        api: api(&body),
        at: Instant::now(),
        answered_here,
        source_headers,
    });
    if shared.throttled.load(Ordering::SeqCst) {
        return Ok(throttled(service(&parts.headers, &body), n));
    }
    if answered_here {
        return Ok(no_topology(n));
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let forward = forward(shared, action, parts.method, path, parts.headers, body);
    // Its own task, so that moto finishes it even if the client leaves.
    Ok(match tokio::spawn(forward).await {
        Ok(response) => response,
        Err(e) => plain(StatusCode::BAD_GATEWAY, format!("forwarding: {e}")),
    })
}

async fn forward(
    shared: Arc<Shared>,
    action: String,
    method: hyper::Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let sent = shared
        .client
        .request(method, format!("{}{path}", shared.upstream))
        .headers(end_to_end(&headers))
        .body(body)
        .send()
        .await;
    let failed = |code: &str| shared.failures.lock().push(format!("{action} {code}"));
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => {
            failed(StatusCode::BAD_GATEWAY.as_str());
            return plain(StatusCode::BAD_GATEWAY, format!("moto: {e}"));
        }
    };
    let status = answer.status();
    let headers = end_to_end(answer.headers());
    let body = match answer.bytes().await {
        Ok(body) => body,
        Err(e) => {
            failed(StatusCode::BAD_GATEWAY.as_str());
            return plain(StatusCode::BAD_GATEWAY, format!("moto's body: {e}"));
        }
    };
    if !status.is_success() {
        failed(&error_code(&body).unwrap_or_else(|| status.as_str().to_owned()));
    }
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// The `<Code>` of an AWS query-protocol error body.
fn error_code(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find("<Code>")? + "<Code>".len();
    let end = start + text[start..].find("</Code>")?;
    Some(text[start..end].trim().to_owned())
}

fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| !HOP_BY_HOP.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Which service `headers` and `body` are for: the service in the
/// signature's credential scope (`Credential=<key>/<date>/<region>/<service>/aws4_request`),
/// else the API version in the form body.
fn service(headers: &HeaderMap, body: &[u8]) -> Service {
    let scope = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .and_then(|credential| credential.split('/').nth(3));
    match scope {
        Some("elasticloadbalancing") => Service::Elbv2,
        Some(_) => Service::Ec2,
        None if String::from_utf8_lossy(body).contains("Version=2015-12-01") => Service::Elbv2,
        None => Service::Ec2,
    }
}

/// The API a form body's `Version` names.
fn api(body: &[u8]) -> &'static str {
    let version = form_urlencoded::parse(body).find(|(key, _)| key == "Version");
    match version.as_ref().map(|(_, v)| v.as_ref()) {
        Some("2016-11-15") => "EC2",
        Some("2012-06-01") => "ELB",
        Some("2015-12-01") => "ELBv2",
        Some("2011-06-15") => "STS",
        _ => "?",
    }
}

/// The query protocol's `Action` in a form body; `?` when it has none.
fn action(body: &[u8]) -> String {
    form_urlencoded::parse(body)
        .find(|(key, _)| key == "Action")
        .map_or_else(|| "?".to_owned(), |(_, value)| value.into_owned())
}

/// AWS's answer to `DescribeInstanceTopology` when no instance asked
/// about has a topology; `n` makes its request ID.
fn no_topology(n: u64) -> Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceTopologyResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>00000000-0000-4000-8000-{n:012x}</requestId><instanceSet/></DescribeInstanceTopologyResponse>"
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    response
}

/// AWS's answer to a rate-limited request of `service`; `n` makes its
/// request ID.
fn throttled(service: Service, n: u64) -> Response<Full<Bytes>> {
    let id = format!("00000000-0000-4000-8000-{n:012x}");
    let (status, body) = match service {
        Service::Ec2 => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>{id}</RequestID></Response>"
            ),
        ),
        Service::Elbv2 => (
            StatusCode::BAD_REQUEST,
            format!(
                "<ErrorResponse xmlns=\"http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/\"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>{id}</RequestId></ErrorResponse>"
            ),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    if let Ok(id) = HeaderValue::from_str(&id) {
        headers.insert(HeaderName::from_static("x-amzn-requestid"), id);
    }
    response
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(service: &str) -> HeaderMap {
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=testing/20250101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&auth).expect("a valid header"),
        );
        headers
    }

    #[test]
    fn an_error_bodys_code_names_the_failure() {
        let body = b"<Response><Errors><Error><Code>RouteAlreadyExists</Code>\
                     <Message>taken</Message></Error></Errors></Response>";
        assert_eq!(error_code(body).as_deref(), Some("RouteAlreadyExists"));
        assert_eq!(error_code(b"<html>busy</html>"), None);
    }

    #[test]
    fn the_signature_scope_then_the_api_version_tells_the_service() {
        assert_eq!(service(&signed("ec2"), b""), Service::Ec2);
        assert_eq!(
            service(&signed("elasticloadbalancing"), b"Action=DescribeInstances"),
            Service::Elbv2
        );
        let unsigned = HeaderMap::new();
        assert_eq!(
            service(
                &unsigned,
                b"Action=DescribeLoadBalancers&Version=2015-12-01"
            ),
            Service::Elbv2
        );
        assert_eq!(
            service(&unsigned, b"Action=DescribeInstances&Version=2016-11-15"),
            Service::Ec2
        );
    }

    #[tokio::test]
    async fn throttled_requests_are_counted_and_the_sdk_reads_each_services_throttling() {
        use aws_sdk_ec2::config::retry::RetryConfig;
        use aws_sdk_ec2::config::{BehaviorVersion, Region};
        use aws_sdk_ec2::error::ProvideErrorMetadata;

        // Nothing listens on the discard port: a forwarded request fails.
        let proxy = Proxy::start("http://127.0.0.1:9").await.expect("started");
        let ec2 = aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new(super::super::REGION))
                .endpoint_url(&proxy.endpoint)
                .credentials_provider(super::super::credentials())
                .retry_config(RetryConfig::disabled())
                .build(),
        );
        let elbv2 = aws_sdk_elasticloadbalancingv2::Client::from_conf(
            aws_sdk_elasticloadbalancingv2::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(Region::new(super::super::REGION))
                .endpoint_url(&proxy.endpoint)
                .credentials_provider(super::super::credentials())
                .retry_config(RetryConfig::disabled())
                .build(),
        );
        proxy.set_throttled(true);
        let refused = ec2.describe_instances().send().await.unwrap_err();
        assert_eq!(refused.code(), Some("RequestLimitExceeded"), "{refused:?}");
        assert_eq!(
            refused.raw_response().map(|r| r.status().as_u16()),
            Some(503)
        );
        let refused = elbv2.describe_load_balancers().send().await.unwrap_err();
        assert_eq!(refused.code(), Some("Throttling"), "{refused:?}");
        assert_eq!(
            refused.raw_response().map(|r| r.status().as_u16()),
            Some(400)
        );
        assert_eq!(proxy.requests(), 2);

        proxy.set_throttled(false);
        let failed = ec2.describe_instances().send().await.unwrap_err();
        assert_eq!(
            failed.raw_response().map(|r| r.status().as_u16()),
            Some(502)
        );
        assert_eq!(proxy.requests(), 3);
        assert_eq!(
            proxy.failures(),
            BTreeMap::from([("DescribeInstances 502".to_owned(), 1)]),
            "a throttled answer is the proxy's own; a failed forward is counted"
        );
    }
}
