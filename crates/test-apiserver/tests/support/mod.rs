//! What the contract tests run against: the in-memory server, or the real
//! cluster `KUBECONFIG` points at. Each contract test runs the same body on
//! both (the real-cluster variant is ignored by default).

#![allow(dead_code, reason = "each test file uses a different part")]

pub(crate) mod process;

use std::future::Future;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use test_apiserver::TestApiServer;

/// How often the in-memory server sends bookmarks in contract tests.
pub(crate) const BOOKMARK_INTERVAL: Duration = Duration::from_millis(300);

/// A Kubernetes API to test against.
pub(crate) enum Target {
    Memory(TestApiServer),
    Cluster(Client),
}

impl Target {
    pub(crate) async fn in_memory() -> anyhow::Result<Self> {
        let server = TestApiServer::builder()
            .bookmark_interval(BOOKMARK_INTERVAL)
            .start()
            .await?;
        Ok(Self::Memory(server))
    }

    pub(crate) async fn real_cluster() -> anyhow::Result<Self> {
        if std::env::var_os("KUBECONFIG").is_none() {
            bail!("set KUBECONFIG to the cluster the contract tests should run against");
        }
        let config = kube::Config::infer().await.context("reading KUBECONFIG")?;
        Ok(Self::Cluster(Client::try_from(config)?))
    }

    pub(crate) fn client(&self) -> Client {
        match self {
            Self::Memory(server) => server.client(),
            Self::Cluster(client) => client.clone(),
        }
    }

    /// The in-memory server, for assertions only it can answer.
    pub(crate) fn server(&self) -> Option<&TestApiServer> {
        match self {
            Self::Memory(server) => Some(server),
            Self::Cluster(_) => None,
        }
    }

    /// How long to wait for a bookmark: kube-apiserver sends one about
    /// every minute.
    pub(crate) fn bookmark_wait(&self) -> Duration {
        match self {
            Self::Memory(_) => Duration::from_secs(10),
            Self::Cluster(_) => Duration::from_secs(90),
        }
    }
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
