//! The Kubernetes API an end-to-end test runs against: the in-memory test
//! API server (the default), or a real kube-apiserver and etcd started for
//! the test when [`APISERVER_ENV`] is `real`.
//!
//! Both authenticate and authorize as a cluster does: the test's own client
//! is an administrator (`system:masters`), and the CCM under test runs with
//! the Helm chart's ServiceAccount and RBAC ([`ApiServer::ccm_credentials`]),
//! so every suite proves the chart's RBAC on both servers.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use ccm_test_apiserver::{AuthorizationMode, TestApiServer};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};

use crate::control_plane::{ADMIN_TOKEN, ControlPlane, kubeconfig_yaml};
use crate::rbac::ChartRbac;

/// `real` runs the suites against a real kube-apiserver; anything else (or
/// nothing) against the in-memory test API server.
pub const APISERVER_ENV: &str = "CCM_TEST_APISERVER";

/// A Kubernetes API server for one test.
#[derive(Debug)]
pub enum ApiServer {
    /// `testing/test-apiserver`, in this process, in RBAC mode.
    Memory(Box<MemoryServer>),
    /// kube-apiserver and etcd, as child processes.
    Real(Box<ControlPlane>),
}

/// The in-memory test API server as [`ApiServer`] starts it: a static
/// administrator token (`--token-auth-file`), `--authorization-mode=RBAC`
/// and a client CA published in `extension-apiserver-authentication`, as a
/// kube-apiserver has.
///
/// # Guarantees
/// Dropped while the test is not already failing, it fails the test if the
/// server answered 403 to any request of a ServiceAccount that
/// [`ApiServer::ccm_credentials`] handed out: the chart's RBAC lacks a rule,
/// whether or not the CCM logged the refusal.
#[derive(Debug)]
pub struct MemoryServer {
    server: TestApiServer,
    /// The token file, the client CA and the CCMs' kubeconfigs.
    dir: tempfile::TempDir,
    /// The users of the tokens handed to CCMs.
    ccm_users: Mutex<Vec<String>>,
}

impl MemoryServer {
    async fn start(nodes: usize) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("ccm-test-apiserver-")
            .tempdir()?;
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{ADMIN_TOKEN},ccm-test-admin,ccm-test-admin,\"system:masters\"\n"),
        )?;
        let pki = crate::pki::write(dir.path())?;
        let server = TestApiServer::builder()
            .token_auth_file(&tokens)
            .authorization_mode(AuthorizationMode::Rbac)
            .client_ca_file(&pki.ca_cert)
            .seed_nodes(nodes)
            .start()
            .await?;
        anonymous_is_admin(&server.client()).await?;
        Ok(Self {
            server,
            dir,
            ccm_users: Mutex::new(Vec::new()),
        })
    }

    /// The server itself: its request log, stats and faults.
    pub fn test_apiserver(&self) -> &TestApiServer {
        &self.server
    }

    /// The CCM's requests that arrived without a token (its user agent,
    /// user `system:anonymous`): a CCM that sent none would pass as the
    /// administrator (see [`anonymous_is_admin`]) and prove nothing.
    fn anonymous_ccm_requests(&self) -> Vec<String> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| {
                r.user_agent.contains("-cloud-controller-manager/")
                    && r.user.as_deref() == Some(ANONYMOUS)
            })
            .map(|r| format!("{} {} ({})", r.method, r.path, r.user_agent))
            .collect()
    }

    /// The requests the server refused with 403 to a user that
    /// [`ApiServer::ccm_credentials`] handed out, one line each.
    pub fn ccm_refusals(&self) -> Vec<String> {
        let users = self
            .ccm_users
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.status == 403 && r.user.as_ref().is_some_and(|u| users.contains(u)))
            .map(|r| {
                format!(
                    "{} {}{} ({} {}{})",
                    r.method,
                    r.path,
                    if r.query.is_empty() {
                        String::new()
                    } else {
                        format!("?{}", r.query)
                    },
                    r.verb,
                    r.resource,
                    if r.subresource.is_empty() {
                        String::new()
                    } else {
                        format!("/{}", r.subresource)
                    },
                )
            })
            .collect()
    }
}

impl Drop for MemoryServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let refused = self.ccm_refusals();
        assert!(
            refused.is_empty(),
            "the CCM, running with the chart's RBAC, was refused by the test API server \
             (add the rule to charts/cloud-controller-manager/templates/rbac*.yaml):\n{}",
            refused.join("\n")
        );
        let anonymous = self.anonymous_ccm_requests();
        assert!(
            anonymous.is_empty(),
            "the CCM sent requests without a token, which this server answers as an \
             administrator:\n{}",
            anonymous.join("\n")
        );
    }
}

/// The anonymous user: what a request without a bearer token is.
const ANONYMOUS: &str = "system:anonymous";

/// Binds `cluster-admin` to `system:anonymous`. kubectl (client-go) sends
/// no bearer token to a plain-HTTP server, so the tests' kubectl reaches
/// the in-memory server anonymously and needs an administrator's rights.
/// The CCM is not weakened by this: it sends its ServiceAccount token, and
/// a token that does not authenticate is 401, never anonymous (and an
/// anonymous CCM request fails the test, see [`MemoryServer`]).
async fn anonymous_is_admin(admin: &kube::Client) -> anyhow::Result<()> {
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "ccm-test:kubectl-over-http-is-anonymous" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ANONYMOUS }],
    }))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .context("binding cluster-admin to system:anonymous for kubectl")?;
    Ok(())
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
    /// ([`ccm_test_apiserver::seed_node`]).
    ///
    /// # Errors
    /// When it does not start or a node is refused.
    pub async fn with_nodes(nodes: usize) -> anyhow::Result<Self> {
        if Self::real_requested() {
            let plane = ControlPlane::start().await?;
            let api: Api<Node> = Api::all(plane.client());
            for i in 1..=nodes {
                let node: Node = serde_json::from_value(ccm_test_apiserver::seed_node(i))?;
                api.create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("creating node-{i}"))?;
            }
            Ok(Self::Real(Box::new(plane)))
        } else {
            Ok(Self::Memory(Box::new(MemoryServer::start(nodes).await?)))
        }
    }

    /// A client with every right.
    pub fn client(&self) -> kube::Client {
        match self {
            Self::Memory(memory) => memory.server.client(),
            Self::Real(plane) => plane.client(),
        }
    }

    /// The administrator acting as `user` in `groups` (impersonation
    /// headers, which an administrator may send), for requests a test must
    /// make as someone else: a node's certificate request, for one.
    ///
    /// # Errors
    /// When the administrator's kubeconfig cannot be read.
    pub async fn client_impersonating(
        &self,
        user: &str,
        groups: &[&str],
    ) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig_path())?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
        Ok(kube::Client::try_from(config)?)
    }

    /// A kubeconfig with every right.
    pub fn kubeconfig_path(&self) -> &Path {
        match self {
            Self::Memory(memory) => memory.server.kubeconfig_path(),
            Self::Real(plane) => plane.kubeconfig_path(),
        }
    }

    /// What `provider`'s CCM should run with: the chart's ServiceAccount
    /// for `provider` with the chart's RBAC applied, and a fresh token of
    /// it from TokenRequest. The objects come from [`RBAC_DIR_ENV`] when it
    /// is set, else from `helm template` with the chart's
    /// `ci/<provider>-values.yaml` and the helm xtask installs. `provider`
    /// may also name a provider's variant among the example values, such
    /// as `fake-csr-approver`.
    ///
    /// # Errors
    /// When the chart's RBAC is unavailable (the error says how to get it)
    /// or the API server refuses it.
    ///
    /// [`RBAC_DIR_ENV`]: crate::RBAC_DIR_ENV
    pub async fn ccm_credentials(&self, provider: &str) -> anyhow::Result<Credentials> {
        self.credentials_of(ChartRbac::of(provider).await?).await
    }

    /// Credentials of the chart's shadow (`dryRun`): its ServiceAccount
    /// with read-only RBAC, as `ci/dry-run-values.yaml` renders them.
    ///
    /// # Errors
    /// When helm is unavailable or the API server refuses the RBAC.
    pub async fn dry_run_credentials(&self) -> anyhow::Result<Credentials> {
        self.credentials_of(ChartRbac::dry_run().await?).await
    }

    async fn credentials_of(&self, rbac: ChartRbac) -> anyhow::Result<Credentials> {
        let admin = self.client();
        rbac.apply(&admin).await?;
        rbac.wait_effective(&admin).await?;
        let token = rbac.token(&admin).await?;
        let kubeconfig = match self {
            Self::Memory(memory) => {
                memory
                    .ccm_users
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(rbac.user());
                let path = memory
                    .dir
                    .path()
                    .join(format!("kubeconfig-{}", rbac.account));
                std::fs::write(
                    &path,
                    kubeconfig_yaml(memory.server.url(), None, &rbac.account, &token),
                )
                .with_context(|| format!("writing {}", path.display()))?;
                path
            }
            Self::Real(plane) => plane.kubeconfig_with_token(&rbac.account, &token)?,
        };
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
