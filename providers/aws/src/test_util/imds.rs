//! A loopback stand-in for the instance metadata service (IMDSv2), so that
//! tests of the provider's metadata path never reach `169.254.169.254`.
//!
//! It answers `PUT /latest/api/token` with a session token, and `GET`s that
//! carry that token for the paths it was given ([`Imds::start`]); anything
//! else is a 404, and a `GET` without the token a 401, as IMDSv2 answers.
//! Point a provider at it with a `[ServiceOverride]` for `imds`
//! ([`Imds::service_override`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::{Error, REGION};

/// The session token the stand-in hands out and then requires.
const TOKEN: &str = "stand-in-session-token";
const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";
const TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";

/// The stand-in, serving until dropped.
#[derive(Debug)]
pub struct Imds {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    asked: Arc<Mutex<Vec<String>>>,
    accept: JoinHandle<()>,
}

impl Imds {
    /// Serves `paths` (`/latest/meta-data/instance-id` → `i-...`).
    ///
    /// # Errors
    /// [`Error::Io`] when no loopback port can be bound.
    pub async fn start(paths: &[(&str, &str)]) -> Result<Self, Error> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(super::io("binding the IMDS stand-in"))?;
        let address = listener
            .local_addr()
            .map_err(super::io("reading the IMDS stand-in's address"))?;
        let paths: Arc<BTreeMap<String, String>> = Arc::new(
            paths
                .iter()
                .map(|(p, v)| ((*p).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let asked = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn(accept(listener, paths, asked.clone()));
        Ok(Self {
            endpoint: format!("http://{address}"),
            asked,
            accept,
        })
    }

    /// A stand-in for the instance `instance_id`.
    ///
    /// # Errors
    /// As [`Imds::start`].
    pub async fn for_instance(instance_id: &str) -> Result<Self, Error> {
        Self::start(&[("/latest/meta-data/instance-id", instance_id)]).await
    }

    /// The `[ServiceOverride]` section (numbered `n`) pointing `imds` here.
    pub fn service_override(&self, n: usize) -> String {
        format!(
            "[ServiceOverride \"{n}\"]\nService = imds\nRegion = {REGION}\nURL = {}\nSigningRegion = {REGION}\n",
            self.endpoint
        )
    }

    /// The paths of every `GET` so far, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().clone()
    }
}

impl Drop for Imds {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept(
    listener: TcpListener,
    paths: Arc<BTreeMap<String, String>>,
    asked: Arc<Mutex<Vec<String>>>,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let paths = paths.clone();
        let asked = asked.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(request, paths.clone(), asked.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    paths: Arc<BTreeMap<String, String>>,
    asked: Arc<Mutex<Vec<String>>>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = request.uri().path().to_owned();
    if request.method() == Method::PUT && path == "/latest/api/token" {
        let ttl = request
            .headers()
            .get(TTL_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("21600")
            .to_owned();
        return Ok(respond(StatusCode::OK, TOKEN, Some(&ttl)));
    }
    if request.method() != Method::GET {
        return Ok(respond(StatusCode::METHOD_NOT_ALLOWED, "", None));
    }
    asked.lock().push(path.clone());
    let token = request.headers().get(TOKEN_HEADER).map(|v| v.as_bytes());
    if token != Some(TOKEN.as_bytes()) {
        return Ok(respond(StatusCode::UNAUTHORIZED, "", None));
    }
    Ok(match paths.get(&path) {
        Some(value) => respond(StatusCode::OK, value, None),
        None => respond(StatusCode::NOT_FOUND, "", None),
    })
}

fn respond(status: StatusCode, body: &str, ttl: Option<&str>) -> Response<Full<Bytes>> {
    let mut response = Response::builder().status(status);
    if let Some(ttl) = ttl {
        response = response.header(TTL_HEADER, ttl);
    }
    response
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
