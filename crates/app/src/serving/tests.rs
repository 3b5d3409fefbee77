//! The HTTPS server in process: a real listener on 127.0.0.1 with its
//! flags parsed as a user gives them, reviews answered by a small stub API
//! server that counts them, and reqwest as the client.

mod auth;
mod limits;
mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Config, Error, ReviewClients, Serving, bind, serve};
use crate::flags::{Command, parse};

/// What the stub answers for the authentication ConfigMap.
#[derive(Debug, Clone)]
enum ConfigMapAnswer {
    Missing,
    Forbidden,
    Data(BTreeMap<String, String>),
}

#[derive(Debug, Clone)]
struct StubState {
    token_reviews: Arc<AtomicUsize>,
    access_reviews: Arc<AtomicUsize>,
    config_map: Arc<Mutex<ConfigMapAnswer>>,
}

/// A stand-in API server: `alice-token` is alice (allowed `get` on
/// `/metrics`), `bob-token` is bob (allowed nothing), anything else no one.
#[derive(Debug)]
struct Stub {
    addr: SocketAddr,
    state: StubState,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Stub {
    async fn start() -> Self {
        let state = StubState {
            token_reviews: Arc::default(),
            access_reviews: Arc::default(),
            config_map: Arc::new(Mutex::new(ConfigMapAnswer::Missing)),
        };
        let router = Router::new()
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                post(token_review),
            )
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(access_review),
            )
            .route(
                "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
                get(config_map),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        Self {
            addr,
            state,
            _stop: stop,
        }
    }

    fn client(&self) -> kube::Client {
        client_for(&format!("http://{}", self.addr))
    }

    fn clients(&self) -> ReviewClients {
        ReviewClients {
            authentication: self.client(),
            authorization: self.client(),
        }
    }

    fn token_reviews(&self) -> usize {
        self.state.token_reviews.load(Ordering::SeqCst)
    }

    fn access_reviews(&self) -> usize {
        self.state.access_reviews.load(Ordering::SeqCst)
    }

    fn answer_config_map(&self, answer: ConfigMapAnswer) {
        *self.state.config_map.lock() = answer;
    }
}

fn client_for(url: &str) -> kube::Client {
    kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
}

async fn token_review(State(state): State<StubState>, Json(review): Json<Value>) -> Json<Value> {
    state.token_reviews.fetch_add(1, Ordering::SeqCst);
    let status = match review["spec"]["token"].as_str() {
        Some("alice-token") => json!({
            "authenticated": true,
            "user": {"username": "alice", "uid": "alice-uid", "groups": ["readers"]},
        }),
        Some("bob-token") => json!({
            "authenticated": true,
            "user": {"username": "bob", "groups": []},
        }),
        _ => json!({"authenticated": false, "error": "token not recognized"}),
    };
    Json(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "metadata": {},
        "spec": review["spec"],
        "status": status,
    }))
}

async fn access_review(State(state): State<StubState>, Json(review): Json<Value>) -> Json<Value> {
    state.access_reviews.fetch_add(1, Ordering::SeqCst);
    let spec = &review["spec"];
    let allowed = spec["user"] == "alice"
        && spec["nonResourceAttributes"]["path"] == "/metrics"
        && spec["nonResourceAttributes"]["verb"] == "get";
    Json(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": spec,
        "status": {"allowed": allowed},
    }))
}

async fn config_map(State(state): State<StubState>) -> (StatusCode, Json<Value>) {
    let status = |code: u16, reason: &str| {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": reason, "reason": reason, "code": code})
    };
    let answer = state.config_map.lock().clone();
    match answer {
        ConfigMapAnswer::Missing => (StatusCode::NOT_FOUND, Json(status(404, "NotFound"))),
        ConfigMapAnswer::Forbidden => (StatusCode::FORBIDDEN, Json(status(403, "Forbidden"))),
        ConfigMapAnswer::Data(data) => (
            StatusCode::OK,
            Json(json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": data,
            })),
        ),
    }
}

/// The serving config for `args` as the command line gives them, on an
/// ephemeral loopback port.
fn config(args: &[&str]) -> Config {
    let argv = ["fake-cloud-controller-manager", "--bind-address=127.0.0.1"]
        .into_iter()
        .chain(args.iter().copied())
        .map(str::to_owned);
    let Ok(Command::Run(settings)) = parse("fake", argv) else {
        panic!("{args:?} should parse");
    };
    let mut config = settings.serving.expect("serving is on");
    config.addr = "127.0.0.1:0".parse().unwrap();
    config
}

/// A running HTTPS server; dropping it stops it.
#[derive(Debug)]
struct Running {
    addr: SocketAddr,
    shutdown: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// Files are polled this often in these tests.
const RELOAD_EVERY: Duration = Duration::from_millis(100);

async fn try_start(args: &[&str], stub: &Stub) -> Result<Running, Error> {
    let config = config(args);
    let shutdown = CancellationToken::new();
    let mut serving = Serving::build_with(&config, stub.clients(), &shutdown, RELOAD_EVERY).await?;
    let listener = bind(config.addr, false).unwrap();
    let addr = listener.local_addr().unwrap();
    let router = serving.guard_routes(
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/metrics", get(|| async { "ccm_up 1\n" })),
    );
    tokio::spawn(serve(listener, serving, router, shutdown.clone()));
    Ok(Running { addr, shutdown })
}

async fn start(args: &[&str], stub: &Stub) -> Running {
    try_start(args, stub)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A client that trusts any server certificate, keeps no idle HTTP/1.1
/// connection (an HTTP/2 one is still reused) and keeps the TLS details.
fn https() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
}

/// `GET url` with an optional bearer token: status and body.
async fn get_with(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The DER of the certificate the server presents for `url`.
async fn served_certificate(client: &reqwest::Client, url: &str) -> Vec<u8> {
    let response = client.get(url).send().await.unwrap();
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .expect("the server presents a certificate")
        .to_vec()
}

/// The DER of the first certificate in a PEM text.
fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}
