//! A loopback proxy in front of moto for the condition suite. It can hold
//! the CCM's `CreateLoadBalancer` unsent, so the test reads what a Service
//! says before its load balancer exists, and, while targets are
//! registering, answers `DescribeTargetHealth` and `DescribeInstanceHealth`
//! as AWS does for a target still being registered: moto reports a running
//! instance healthy from its first answer.
//!
//! # Assumptions
//! moto 5.2.5's XML: a healthy ELBv2 target is exactly
//! [`NLB_HEALTHY`], an in-service classic instance exactly
//! [`CLASSIC_IN_SERVICE`] (the unit tests below hold moto's answers).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use tokio::sync::watch;

/// How large a request the proxy reads (AWS query requests are small).
const MAX_BODY: usize = 16 * 1024 * 1024;
/// The call held while creates are held: ELBv2's and the classic ELB API's.
const HELD: &str = "CreateLoadBalancer";
/// The longest a call is held: under the provider's 30 s attempt timeout,
/// so a test that fails before releasing never makes the SDK retry a create.
const HOLD_AT_MOST: Duration = Duration::from_secs(20);

/// moto's healthy ELBv2 target, and AWS's answer while it registers.
const NLB_HEALTHY: &str = "<TargetHealth><State>healthy</State></TargetHealth>";
const NLB_REGISTERING: &str = "<TargetHealth><State>initial</State><Reason>Elb.RegistrationInProgress</Reason><Description>Target registration is in progress</Description></TargetHealth>";
/// moto's in-service classic instance, and AWS's answer while it registers.
const CLASSIC_IN_SERVICE: &str =
    "<State>InService</State><ReasonCode>N/A</ReasonCode><Description>N/A</Description>";
const CLASSIC_REGISTERING: &str = "<State>Unknown</State><ReasonCode>ELB</ReasonCode><Description>Instance registration is still in progress.</Description>";

struct Shared {
    upstream: String,
    http: reqwest::Client,
    /// `true` while [`HELD`] calls wait.
    holding: watch::Sender<bool>,
    /// [`HELD`] calls that had to wait.
    held: AtomicU64,
    registering: AtomicBool,
    /// Health answers rewritten as registering.
    rewritten: AtomicU64,
}

/// A running proxy; it stops when dropped.
pub(crate) struct Proxy {
    /// `http://127.0.0.1:PORT`, to put in the CCM's cloud config.
    pub(crate) endpoint: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy in front of `upstream` (moto's endpoint) that
    /// forwards every call unchanged until told otherwise.
    pub(crate) async fn start(upstream: &str) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder().no_proxy().build()?,
            holding: watch::Sender::new(false),
            held: AtomicU64::new(0),
            registering: AtomicBool::new(false),
            rewritten: AtomicU64::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            // Ends only when the test drops the proxy.
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            endpoint,
            shared,
            task,
        })
    }

    /// From now on `CreateLoadBalancer` waits, unsent, until
    /// [`Proxy::release_creates`] (or for at most 20 s).
    pub(crate) fn hold_creates(&self) {
        self.shared.holding.send_replace(true);
    }

    /// Sends the held `CreateLoadBalancer` calls on, and every later one.
    pub(crate) fn release_creates(&self) {
        self.shared.holding.send_replace(false);
    }

    /// How many `CreateLoadBalancer` calls have waited.
    pub(crate) fn held(&self) -> u64 {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// While `on`, healthy targets are answered as still registering.
    pub(crate) fn set_registering(&self, on: bool) {
        self.shared.registering.store(on, Ordering::SeqCst);
    }

    /// How many health answers were rewritten as registering.
    pub(crate) fn rewritten(&self) -> u64 {
        self.shared.rewritten.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.release_creates();
        self.task.abort();
    }
}

/// The `Action` of an AWS query-protocol request body.
fn action(body: &[u8]) -> Option<String> {
    body.split(|b| *b == b'&')
        .find_map(|pair| pair.strip_prefix(b"Action="))
        .map(|a| String::from_utf8_lossy(a).into_owned())
}

/// moto's answer to `action` as AWS gives it while its targets register:
/// healthy ELBv2 targets `initial`, in-service classic instances `Unknown`;
/// `None` when there is nothing to rewrite.
fn registering(action: &str, body: &[u8]) -> Option<String> {
    let (healthy, registering) = match action {
        "DescribeTargetHealth" => (NLB_HEALTHY, NLB_REGISTERING),
        "DescribeInstanceHealth" => (CLASSIC_IN_SERVICE, CLASSIC_REGISTERING),
        _ => return None,
    };
    let text = std::str::from_utf8(body).ok()?;
    text.contains(healthy)
        .then(|| text.replace(healthy, registering))
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    match relay(&shared, request).await {
        Ok(response) => response,
        Err(e) => Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::from(format!("the moto proxy: {e:#}")))
            .unwrap_or_default(),
    }
}

async fn relay(shared: &Shared, request: Request) -> anyhow::Result<Response> {
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, MAX_BODY).await?;
    let action = action(&body).unwrap_or_default();
    let hold = action == HELD && *shared.holding.borrow();
    if hold {
        shared.held.fetch_add(1, Ordering::SeqCst);
        let mut holding = shared.holding.subscribe();
        // Sent on after the bound even if never released: the test fails
        // on its own, and the create must not time out in the SDK.
        let _ = tokio::time::timeout(HOLD_AT_MOST, holding.wait_for(|on| !*on)).await;
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let mut headers = parts.headers.clone();
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let answer = shared
        .http
        .request(parts.method.clone(), format!("{}{path}", shared.upstream))
        .headers(headers)
        .body(body)
        .send()
        .await?;
    let status = answer.status();
    let answer_headers: HeaderMap = answer.headers().clone();
    let mut answer_body: Bytes = answer.bytes().await?;
    if status.is_success()
        && shared.registering.load(Ordering::SeqCst)
        && let Some(rewritten) = registering(&action, &answer_body)
    {
        shared.rewritten.fetch_add(1, Ordering::SeqCst);
        answer_body = Bytes::from(rewritten);
    }
    let mut response = Response::builder().status(status);
    for (name, value) in &answer_headers {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            response = response.header(name, value);
        }
    }
    Ok(response.body(Body::from(answer_body))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// moto 5.2.5's answer for a running and a stopped instance.
    const MOTO_TARGET_HEALTH: &str = "<DescribeTargetHealthResponse><DescribeTargetHealthResult><TargetHealthDescriptions><member><Target><Id>i-1</Id><Port>30080</Port></Target><HealthCheckPort>traffic-port</HealthCheckPort><TargetHealth><State>healthy</State></TargetHealth></member><member><Target><Id>i-2</Id><Port>30080</Port></Target><HealthCheckPort>traffic-port</HealthCheckPort><TargetHealth><State>unused</State><Reason>Target.InvalidState</Reason><Description>Target is in the stopped state</Description></TargetHealth></member></TargetHealthDescriptions></DescribeTargetHealthResult></DescribeTargetHealthResponse>";
    const MOTO_INSTANCE_HEALTH: &str = "<DescribeInstanceHealthResponse><DescribeInstanceHealthResult><InstanceStates><member><InstanceId>i-1</InstanceId><State>InService</State><ReasonCode>N/A</ReasonCode><Description>N/A</Description></member><member><InstanceId>i-2</InstanceId><State>OutOfService</State><ReasonCode>N/A</ReasonCode><Description>N/A</Description></member></InstanceStates></DescribeInstanceHealthResult></DescribeInstanceHealthResponse>";

    #[test]
    fn healthy_targets_are_answered_as_registering_and_others_left_as_moto_said() {
        let nlb = registering("DescribeTargetHealth", MOTO_TARGET_HEALTH.as_bytes())
            .expect("a healthy target to rewrite");
        assert!(nlb.contains("<Id>i-1</Id><Port>30080</Port></Target><HealthCheckPort>traffic-port</HealthCheckPort><TargetHealth><State>initial</State><Reason>Elb.RegistrationInProgress</Reason>"), "{nlb}");
        assert!(!nlb.contains("<State>healthy</State>"), "{nlb}");
        assert!(nlb.contains("<State>unused</State><Reason>Target.InvalidState</Reason>"));

        let classic = registering("DescribeInstanceHealth", MOTO_INSTANCE_HEALTH.as_bytes())
            .expect("an in-service instance to rewrite");
        assert!(
            classic.contains(
                "<InstanceId>i-1</InstanceId><State>Unknown</State><ReasonCode>ELB</ReasonCode>"
            ),
            "{classic}"
        );
        assert!(classic.contains("<InstanceId>i-2</InstanceId><State>OutOfService</State>"));

        assert_eq!(
            registering("DescribeLoadBalancers", MOTO_TARGET_HEALTH.as_bytes()),
            None
        );
        let stopped_only = MOTO_INSTANCE_HEALTH.replace("InService", "OutOfService");
        assert_eq!(
            registering("DescribeInstanceHealth", stopped_only.as_bytes()),
            None
        );
    }

    #[test]
    fn the_action_is_read_from_the_query_body() {
        assert_eq!(
            action(b"Action=CreateLoadBalancer&Version=2015-12-01&Name=a1").as_deref(),
            Some(HELD)
        );
        assert_eq!(
            action(b"Version=2012-06-01&Action=DescribeInstanceHealth").as_deref(),
            Some("DescribeInstanceHealth")
        );
        assert_eq!(action(b"{}"), None);
    }
}
