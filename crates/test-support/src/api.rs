//! The Kubernetes API an end-to-end test runs against: the in-memory test
//! API server (the default), or a real kube-apiserver and etcd started for
//! the test when [`APISERVER_ENV`] is `real`.
//!
//! Against the real one, the CCM under test can run with the Helm chart's
//! ServiceAccount and RBAC rather than as administrator: `cargo xtask ci`
//! renders each provider's RBAC into [`RBAC_DIR_ENV`], and
//! [`ApiServer::ccm_kubeconfig`] applies it and hands out that
//! ServiceAccount's token.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use test_apiserver::TestApiServer;

use crate::control_plane::ControlPlane;

/// `real` runs the suites against a real kube-apiserver; anything else (or
/// nothing) against the in-memory test API server.
pub const APISERVER_ENV: &str = "CCM_TEST_APISERVER";
/// A directory holding `<provider>.yaml`: the chart's ServiceAccount and
/// RBAC for that provider, as `helm template` renders them.
pub const RBAC_DIR_ENV: &str = "CCM_TEST_RBAC_DIR";
/// The namespace the chart's ServiceAccount lives in.
const RELEASE_NAMESPACE: &str = "kube-system";

/// A Kubernetes API server for one test.
#[derive(Debug)]
pub enum ApiServer {
    /// `crates/test-apiserver`, in this process.
    Memory(TestApiServer),
    /// kube-apiserver and etcd, as child processes.
    Real(Box<ControlPlane>),
}

/// The kubeconfig a CCM process should use, and whether it grants less
/// than everything (so a 403 in the CCM's log is a missing RBAC rule).
#[derive(Debug, Clone)]
pub struct Credentials {
    pub kubeconfig: PathBuf,
    pub rbac_limited: bool,
}

impl ApiServer {
    /// Whether the environment asks for a real kube-apiserver.
    fn real_requested() -> bool {
        std::env::var(APISERVER_ENV).is_ok_and(|v| v == "real")
    }

    /// The API server the environment asks for, empty but for what every
    /// cluster has.
    ///
    /// # Errors
    /// When it does not start.
    pub async fn start() -> anyhow::Result<Self> {
        Self::with_nodes(0).await
    }

    /// The API server the environment asks for, with nodes `node-1` to
    /// `node-<nodes>` as kubelet registers them
    /// ([`test_apiserver::seed_node`]).
    ///
    /// # Errors
    /// When it does not start or a node is refused.
    pub async fn with_nodes(nodes: usize) -> anyhow::Result<Self> {
        if Self::real_requested() {
            let plane = ControlPlane::start().await?;
            let api: Api<Node> = Api::all(plane.client());
            for i in 1..=nodes {
                let node: Node = serde_json::from_value(test_apiserver::seed_node(i))?;
                api.create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("creating node-{i}"))?;
            }
            Ok(Self::Real(Box::new(plane)))
        } else {
            let server = TestApiServer::builder().seed_nodes(nodes).start().await?;
            Ok(Self::Memory(server))
        }
    }

    /// A client with every right.
    pub fn client(&self) -> kube::Client {
        match self {
            Self::Memory(server) => server.client(),
            Self::Real(plane) => plane.client(),
        }
    }

    /// A kubeconfig with every right.
    pub fn kubeconfig_path(&self) -> &Path {
        match self {
            Self::Memory(server) => server.kubeconfig_path(),
            Self::Real(plane) => plane.kubeconfig_path(),
        }
    }

    /// What `provider`'s CCM should run with. On a real kube-apiserver with
    /// [`RBAC_DIR_ENV`] set: the chart's ServiceAccount, RBAC applied with
    /// kubectl, and a fresh token for it. Otherwise the administrator's
    /// kubeconfig.
    ///
    /// # Errors
    /// When the RBAC file is missing or kubectl fails.
    pub async fn ccm_credentials(&self, provider: &str) -> anyhow::Result<Credentials> {
        let admin = Credentials {
            kubeconfig: self.kubeconfig_path().to_owned(),
            rbac_limited: false,
        };
        let (Self::Real(plane), Some(dir)) = (self, std::env::var_os(RBAC_DIR_ENV)) else {
            return Ok(admin);
        };
        let rbac = PathBuf::from(dir).join(format!("{provider}.yaml"));
        anyhow::ensure!(
            rbac.is_file(),
            "{RBAC_DIR_ENV} has no {provider}.yaml ({})",
            rbac.display()
        );
        let applied = kubectl(
            plane.kubeconfig_path(),
            &["apply", "-o", "name", "-f", &rbac.to_string_lossy()],
        )
        .await?;
        let account = applied
            .lines()
            .find_map(|l| l.strip_prefix("serviceaccount/"))
            .with_context(|| format!("{} holds no ServiceAccount", rbac.display()))?
            .to_owned();
        let token = kubectl(
            plane.kubeconfig_path(),
            &[
                "create",
                "token",
                &account,
                "-n",
                RELEASE_NAMESPACE,
                "--duration=2h",
            ],
        )
        .await?;
        let kubeconfig = plane.kubeconfig_with_token(&account, token.trim())?;
        Ok(Credentials {
            kubeconfig,
            rbac_limited: true,
        })
    }
}

/// How long one kubectl command may take.
const KUBECTL_WITHIN: Duration = Duration::from_secs(60);

/// `kubectl`: `$KUBECTL` if set, else the first on `PATH`.
///
/// # Errors
/// When it is on neither, naming what installs it.
pub fn kubectl_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("KUBECTL") {
        return Ok(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
        .context(
            "kubectl is not on PATH: run `cargo xtask ci`, which installs Debian's kubernetes-client package",
        )
}

/// A kubectl command pointed at `kubeconfig`, with its discovery cache
/// beside it (kept apart from the user's and other tests'), killed if
/// dropped.
///
/// # Errors
/// When kubectl is missing.
pub fn kubectl_command(kubeconfig: &Path) -> anyhow::Result<tokio::process::Command> {
    let cache = kubeconfig
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("kube-cache");
    let mut command = tokio::process::Command::new(kubectl_path()?);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cache-dir={}", cache.display()))
        .kill_on_drop(true);
    Ok(command)
}

/// Runs kubectl against `kubeconfig` (within 60 s) and answers its standard
/// output.
///
/// # Errors
/// When kubectl is missing, fails or hangs; the error holds its standard
/// error.
pub async fn kubectl(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::time::timeout(
        KUBECTL_WITHIN,
        kubectl_command(kubeconfig)?.args(args).output(),
    )
    .await
    .with_context(|| format!("kubectl {} took over {KUBECTL_WITHIN:?}", args.join(" ")))?
    .context("running kubectl")?;
    if !out.status.success() {
        bail!(
            "kubectl {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}
