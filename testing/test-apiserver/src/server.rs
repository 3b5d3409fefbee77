//! Starting, configuring and stopping a server.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use crate::api;
use crate::auth::{self, Auth, AuthorizationMode, tokens};
use crate::error::Error;
use crate::faults::{Failure, Faults, RequestMatch};
use crate::kubeconfig::KubeconfigFile;
use crate::seed;
use crate::shared::Shared;
use crate::stats::{Accounting, RequestRecord, Stats};
use crate::store::Store;

/// Configures a [`TestApiServer`] before it starts.
#[derive(Debug, Clone)]
pub struct Builder {
    bind: SocketAddr,
    kubeconfig: Option<PathBuf>,
    bookmark_interval: Duration,
    history_limit: usize,
    request_log_limit: usize,
    nodes: usize,
    services: usize,
    token_auth_file: Option<PathBuf>,
    anonymous_auth: bool,
    authorization_mode: AuthorizationMode,
    client_ca_file: Option<PathBuf>,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            kubeconfig: None,
            bookmark_interval: Duration::from_secs(60),
            history_limit: 10_000,
            request_log_limit: 100_000,
            nodes: 0,
            services: 0,
            token_auth_file: None,
            anonymous_auth: true,
            authorization_mode: AuthorizationMode::AlwaysAllow,
            client_ca_file: None,
        }
    }
}

impl Builder {
    /// Listens on `addr` instead of an ephemeral port on 127.0.0.1.
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Writes the kubeconfig to `path` (kept after the server stops) instead
    /// of a temporary file (removed when it stops).
    #[must_use]
    pub fn kubeconfig_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig = Some(path.into());
        self
    }

    /// How often watches that asked for bookmarks get one (default 60 s, as
    /// kube-apiserver).
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// How many changes per resource the watch history keeps (default
    /// 10,000); watches and lists from older resourceVersions get 410 Gone.
    #[must_use]
    pub fn history_limit(mut self, changes: usize) -> Self {
        self.history_limit = changes.max(1);
        self
    }

    /// How many requests the request log keeps: the newest, 100,000 by
    /// default. Counts in [`Stats`] are never dropped.
    #[must_use]
    pub fn request_log_limit(mut self, records: usize) -> Self {
        self.request_log_limit = records;
        self
    }

    /// Starts with nodes `node-1` to `node-<count>`, as kubelet registers
    /// them under `--cloud-provider=external`: the
    /// `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule`
    /// taint, a Ready=True condition, a Hostname address, and pod CIDR
    /// [`pod_cidr(i)`](crate::pod_cidr) (`10.244.<i>.0/24` for i < 256).
    #[must_use]
    pub fn seed_nodes(mut self, count: usize) -> Self {
        self.nodes = count;
        self
    }

    /// Starts with Services `lb-1` to `lb-<count>` in `default`: type
    /// LoadBalancer, one TCP port 80 with an allocated nodePort.
    #[must_use]
    pub fn seed_services(mut self, count: usize) -> Self {
        self.services = count;
        self
    }

    /// Authenticates requests with kube-apiserver's static token file
    /// (`--token-auth-file`): CSV records `token,user,uid[,"group1,group2"]`.
    /// A bearer token that is neither in the file nor issued by TokenRequest
    /// is 401; a request without one is `system:anonymous` in
    /// `system:unauthenticated` (see [`Builder::anonymous_auth`]).
    ///
    /// The kubeconfig and [`TestApiServer::client`] then send the file's
    /// first token of a `system:masters` user; when there is none, a random
    /// token minted at start for `system:apiserver` in `system:masters`.
    ///
    /// Without a token file nothing is authenticated and every request is
    /// an administrator.
    #[must_use]
    pub fn token_auth_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.token_auth_file = Some(path.into());
        self
    }

    /// Whether a request without a bearer token is `system:anonymous`
    /// (true, kube-apiserver's `--anonymous-auth` default) or 401.
    /// Matters only with a [token file](Builder::token_auth_file).
    #[must_use]
    pub fn anonymous_auth(mut self, allowed: bool) -> Self {
        self.anonymous_auth = allowed;
        self
    }

    /// Which authorizer decides authenticated requests (default
    /// [`AuthorizationMode::AlwaysAllow`]). Under
    /// [`AuthorizationMode::Rbac`] without a token file every request is
    /// still an administrator; SubjectAccessReviews are decided by RBAC.
    #[must_use]
    pub fn authorization_mode(mut self, mode: AuthorizationMode) -> Self {
        self.authorization_mode = mode;
        self
    }

    /// Publishes the PEM bundle at `path` in ConfigMap
    /// `kube-system/extension-apiserver-authentication` under
    /// `client-ca-file`, as kube-apiserver does with `--client-ca-file`.
    /// (The server speaks plain HTTP: it verifies no client certificates.)
    #[must_use]
    pub fn client_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.client_ca_file = Some(path.into());
        self
    }

    /// Binds, seeds, writes the kubeconfig and starts serving.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when the address is taken, [`Error::Kubeconfig`] when
    /// the kubeconfig cannot be written, [`Error::Client`] when no kube
    /// client can be built for the server; [`Error::TokenFileRead`],
    /// [`Error::TokenFile`] (naming the line) and [`Error::ClientCaFile`]
    /// for the files given.
    pub async fn start(self) -> Result<TestApiServer, Error> {
        let mut static_tokens = self
            .token_auth_file
            .as_deref()
            .map(tokens::StaticTokens::read)
            .transpose()?;
        let admin_token = static_tokens
            .as_mut()
            .map(|t| t.admin_token(|| Ok((tokens::random_token()?, tokens::random_uuid()?))))
            .transpose()
            .map_err(Error::Random)?;
        let client_ca = self
            .client_ca_file
            .as_deref()
            .map(|path| {
                std::fs::read_to_string(path).map_err(|source| Error::ClientCaFile {
                    path: path.to_owned(),
                    source,
                })
            })
            .transpose()?;
        let listener = TcpListener::bind(self.bind)
            .await
            .map_err(|source| Error::Bind {
                addr: self.bind,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: self.bind,
            source,
        })?;
        let mut store = Store::new(self.history_limit);
        seed::cluster_basics(&mut store)?;
        auth::seed_policy(&mut store)?;
        if let Some(ca) = &client_ca {
            auth::seed_client_ca(&mut store, ca)?;
        }
        seed::nodes(&mut store, self.nodes)?;
        seed::services(&mut store, self.services)?;
        // Like a compacted etcd: watches start at or after the seeded state.
        store.compact();
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            accounting: Mutex::new(Accounting::new(self.request_log_limit)),
            faults: Mutex::new(Faults::default()),
            bookmark_interval: self.bookmark_interval,
            close_watches: watch::Sender::new(0),
            address: addr.to_string(),
            auth: Auth {
                static_tokens,
                issued: Mutex::default(),
                mode: self.authorization_mode,
                anonymous: self.anonymous_auth,
            },
        });
        let url = format!("http://{addr}");
        let kubeconfig =
            KubeconfigFile::write(&url, admin_token.as_deref(), self.kubeconfig.as_deref())?;
        let serving = tokio::spawn(serve(listener, shared.clone())).abort_handle();
        let client = client_for(&url, admin_token.as_deref())?;
        Ok(TestApiServer {
            shared,
            url,
            addr,
            kubeconfig,
            client,
            serving,
        })
    }
}

/// A kube client for `url` sending `token`, if any.
fn client_for(url: &str, token: Option<&str>) -> Result<kube::Client, Error> {
    let uri = url.parse().map_err(|source| Error::Url {
        url: url.to_owned(),
        source,
    })?;
    let mut config = kube::Config::new(uri);
    if let Some(token) = token {
        // AuthInfo keeps its token in a secret type built only by decoding.
        config.auth_info =
            serde_json::from_value(serde_json::json!({ "token": token })).unwrap_or_default();
    }
    kube::Client::try_from(config).map_err(|source| Error::Client {
        url: url.to_owned(),
        source,
    })
}

/// The request log of a [`TestApiServer`] ([`TestApiServer::request_log`]).
#[derive(Debug, Clone)]
pub struct RequestLog(Arc<Shared>);

impl RequestLog {
    /// Every logged request, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.0.accounting.lock().records().0
    }
}

/// An in-memory Kubernetes API server on loopback. See the [crate
/// documentation](crate) for what it serves.
///
/// Dropping it stops serving and ends every open connection.
pub struct TestApiServer {
    shared: Arc<Shared>,
    url: String,
    addr: SocketAddr,
    kubeconfig: KubeconfigFile,
    client: kube::Client,
    serving: AbortHandle,
}

impl std::fmt::Debug for TestApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestApiServer")
            .field("url", &self.url)
            .field("kubeconfig", &self.kubeconfig.path())
            .finish_non_exhaustive()
    }
}

impl TestApiServer {
    /// A server on an ephemeral port of 127.0.0.1 with default settings.
    ///
    /// # Errors
    ///
    /// As [`Builder::start`].
    pub async fn start() -> Result<Self, Error> {
        Builder::default().start().await
    }

    /// A [`Builder`] to configure a server.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kube client for the server (cheap to clone).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A kube client for the server that sends `token` as its bearer token
    /// (a token of the token file, or one TokenRequest issued).
    ///
    /// # Errors
    ///
    /// [`Error::Client`] when the client cannot be built.
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, Error> {
        client_for(&self.url, Some(token))
    }

    /// Makes every token TokenRequest issued for ServiceAccount
    /// `namespace/name` expire now, as if its lifetime (at least 10 minutes)
    /// had passed: requests with them get 401 and TokenReview says they do
    /// not authenticate. Answers how many tokens expired. Also
    /// `POST /testapi/serviceaccounts/<namespace>/<name>/expire-tokens`.
    pub fn expire_service_account_tokens(&self, namespace: &str, name: &str) -> usize {
        self.shared.auth.issued.lock().expire(namespace, name)
    }

    /// A kubeconfig file whose current context points at the server.
    pub fn kubeconfig_path(&self) -> &Path {
        self.kubeconfig.path()
    }

    /// The request counters and open watches now.
    pub fn stats(&self) -> Stats {
        self.shared.accounting.lock().snapshot()
    }

    /// Every logged request, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.accounting.lock().records().0
    }

    /// A handle on the request log that outlives a borrow of the server:
    /// a test's fake cloud can read it in the middle of a call.
    pub fn request_log(&self) -> RequestLog {
        RequestLog(self.shared.clone())
    }

    /// Forgets request counts and the request log (open watches stay counted).
    pub fn reset_stats(&self) {
        self.shared.accounting.lock().reset();
    }

    /// Answers the next `times` requests that `matcher` matches with `failure`.
    pub fn fail_next(&self, matcher: RequestMatch, failure: Failure, times: u32) {
        self.shared.faults.lock().inject(matcher, failure, times);
    }

    /// Delays every request by `latency` before it is served.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.faults.lock().latency = latency;
    }

    /// Removes pending injected failures and the added latency.
    pub fn clear_faults(&self) {
        self.shared.faults.lock().clear();
    }

    /// Ends every open watch, as an API server restart or a load balancer
    /// timeout would; clients see the stream end cleanly and re-watch.
    pub fn close_all_watches(&self) {
        self.shared.close_watches.send_modify(|n| *n += 1);
    }

    /// Forgets the watch history, as an etcd compaction does: watches and
    /// lists from any resourceVersion before now get 410 Gone.
    pub fn compact_history(&self) {
        self.shared.store.lock().compact();
    }

    /// The newest resourceVersion issued.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().current_rv()
    }

    /// Stops serving and ends every open connection.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// Accepts connections until aborted; aborting drops the connection set,
/// which ends every connection and the watches on them.
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors or similar: give it a moment.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                // Small responses must not wait for Nagle.
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(api::handle(shared, req).await) }
                    });
                    let _ = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}
