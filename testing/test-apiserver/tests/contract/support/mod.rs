//! What the contract tests run against: the in-memory server, or the real
//! cluster `KUBECONFIG` points at. Each contract test runs the same body on
//! both (the real-cluster variant is ignored by default).

#![allow(dead_code, reason = "each test file uses a different part")]

pub(crate) mod process;
pub(crate) mod table;

use std::future::Future;
use std::time::Duration;

use anyhow::{Context, bail};
use ccm_test_apiserver::{AuthorizationMode, TestApiServer};
use http_body_util::BodyExt;
use kube::Client;
use serde_json::{Value, json};

/// How often the in-memory server sends bookmarks in contract tests.
pub(crate) const BOOKMARK_INTERVAL: Duration = Duration::from_millis(300);

/// A Kubernetes API to test against.
pub(crate) enum Target {
    Memory(TestApiServer),
    /// The administrator's client and the configuration it was made from.
    Cluster(Client, Box<kube::Config>),
}

/// The administrator's token in the in-memory server's token file, for
/// the authentication contract tests (the real cluster has its own).
pub(crate) const ADMIN_TOKEN: &str = "contract-admin-token";

/// A stand-in for the client CA the in-memory server publishes.
pub(crate) const CLIENT_CA: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBdGVzdA==\n-----END CERTIFICATE-----\n";

impl Target {
    pub(crate) async fn in_memory() -> anyhow::Result<Self> {
        let server = TestApiServer::builder()
            .bookmark_interval(BOOKMARK_INTERVAL)
            .start()
            .await?;
        Ok(Self::Memory(server))
    }

    /// An in-memory server that authenticates and authorizes as the real
    /// control plane does: a static token file whose administrator is in
    /// `system:masters`, `--authorization-mode=RBAC`, and a client CA.
    pub(crate) async fn in_memory_with_auth() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{ADMIN_TOKEN},contract-admin,contract-admin,\"system:masters\"\n"),
        )?;
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, CLIENT_CA)?;
        let server = TestApiServer::builder()
            .bookmark_interval(BOOKMARK_INTERVAL)
            .token_auth_file(&tokens)
            .authorization_mode(AuthorizationMode::Rbac)
            .client_ca_file(&ca)
            .start()
            .await?;
        Ok(Self::Memory(server))
    }

    pub(crate) async fn real_cluster() -> anyhow::Result<Self> {
        if std::env::var_os("KUBECONFIG").is_none() {
            bail!("set KUBECONFIG to the cluster the contract tests should run against");
        }
        let config = kube::Config::infer().await.context("reading KUBECONFIG")?;
        Ok(Self::Cluster(
            Client::try_from(config.clone())?,
            Box::new(config),
        ))
    }

    pub(crate) fn client(&self) -> Client {
        match self {
            Self::Memory(server) => server.client(),
            Self::Cluster(client, _) => client.clone(),
        }
    }

    /// A client that sends `token` (`None`: no credentials, anonymous).
    pub(crate) fn client_as(&self, token: Option<&str>) -> anyhow::Result<Client> {
        let mut config = match self {
            Self::Memory(server) => kube::Config::new(server.url().parse()?),
            Self::Cluster(_, config) => (**config).clone(),
        };
        config.auth_info = match token {
            Some(token) => serde_json::from_value(json!({ "token": token }))?,
            None => Default::default(),
        };
        Ok(Client::try_from(config)?)
    }

    /// The administrator's client acting as `user` in `groups`
    /// (impersonation headers).
    pub(crate) fn client_impersonating(
        &self,
        user: &str,
        groups: &[&str],
    ) -> anyhow::Result<Client> {
        let mut config = match self {
            Self::Memory(server) => {
                let mut config = kube::Config::new(server.url().parse()?);
                config.auth_info = serde_json::from_value(json!({ "token": ADMIN_TOKEN }))?;
                config
            }
            Self::Cluster(_, config) => (**config).clone(),
        };
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
        Ok(Client::try_from(config)?)
    }

    /// The server's minor release (`37` for v1.37.2), from `/version`: for
    /// the few words that differ between supported releases.
    pub(crate) async fn minor(&self) -> anyhow::Result<u32> {
        let version = self.client().apiserver_version().await?;
        let digits: String = version
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Ok(digits.parse()?)
    }

    /// The in-memory server, for assertions only it can answer.
    pub(crate) fn server(&self) -> Option<&TestApiServer> {
        match self {
            Self::Memory(server) => Some(server),
            Self::Cluster(..) => None,
        }
    }

    /// How long to wait for a bookmark: kube-apiserver sends one about
    /// every minute.
    pub(crate) fn bookmark_wait(&self) -> Duration {
        match self {
            Self::Memory(_) => Duration::from_secs(10),
            Self::Cluster(..) => Duration::from_secs(90),
        }
    }
}

/// Sends `method path` with a JSON `body` (if any) through `client` and
/// answers the status code and the body as JSON (`Null` when it is not).
pub(crate) async fn raw(
    client: &Client,
    method: http::Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let bytes = body
        .map(serde_json::to_vec)
        .transpose()?
        .unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(bytes))?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((code, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

/// Fails when `fut` takes longer than `secs` seconds: no test may hang.
pub(crate) async fn within<T>(
    secs: u64,
    what: &str,
    fut: impl Future<Output = T>,
) -> anyhow::Result<T> {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .with_context(|| format!("timed out after {secs}s waiting for {what}"))
}

/// Declares a contract test: `$name::in_memory` runs it against a fresh
/// in-memory server, `$name::real_cluster` against `KUBECONFIG` (ignored
/// unless asked for).
#[macro_export]
macro_rules! contract_test {
    ($name:ident, |$target:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports, reason = "bodies use different parts of the parent")]
            use super::*;

            async fn run($target: &support::Target) -> anyhow::Result<()> $body

            #[tokio::test]
            async fn in_memory() -> anyhow::Result<()> {
                run(&support::Target::in_memory().await?).await
            }

            #[tokio::test]
            #[ignore = "needs a real cluster: set KUBECONFIG"]
            async fn real_cluster() -> anyhow::Result<()> {
                run(&support::Target::real_cluster().await?).await
            }
        }
    };
}

/// As [`contract_test!`], with the in-memory server authenticating and
/// authorizing as the real control plane does
/// ([`Target::in_memory_with_auth`]).
#[macro_export]
macro_rules! auth_contract_test {
    ($name:ident, |$target:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports, reason = "bodies use different parts of the parent")]
            use super::*;

            async fn run($target: &support::Target) -> anyhow::Result<()> $body

            #[tokio::test]
            async fn in_memory() -> anyhow::Result<()> {
                run(&support::Target::in_memory_with_auth().await?).await
            }

            #[tokio::test]
            #[ignore = "needs a real cluster: set KUBECONFIG"]
            async fn real_cluster() -> anyhow::Result<()> {
                run(&support::Target::real_cluster().await?).await
            }
        }
    };
}
