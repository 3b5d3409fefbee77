//! The real control plane: etcd and kube-apiserver as child processes on
//! loopback, with a throw-away PKI, a static administrator token, a
//! service-account signing key and the RBAC authorizer.
//!
//! The binaries are the ones `cargo xtask` builds from their Go modules and
//! names in [`KUBE_APISERVER_ENV`] and [`ETCD_ENV`]. Both processes are
//! killed when the [`ControlPlane`] drops, however the test ends.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

use crate::pki;

/// The variable naming the kube-apiserver binary.
pub const KUBE_APISERVER_ENV: &str = "CCM_KUBE_APISERVER";
/// The variable naming the etcd binary.
pub const ETCD_ENV: &str = "CCM_ETCD";
/// The administrator's static bearer token (loopback only, throw-away).
pub(crate) const ADMIN_TOKEN: &str = "ccm-test-admin-token";
/// The second administrator of [`ControlPlane::start_audited`].
pub const AUDITED_USER: &str = "ccm-under-test";
/// [`AUDITED_USER`]'s static bearer token (loopback only, throw-away).
pub const AUDITED_TOKEN: &str = "ccm-under-test-token";
/// The audit log's file name in the control plane's directory.
const AUDIT_LOG: &str = "audit.log";
/// Every request once, as it arrives, without bodies.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
";
/// How long etcd and kube-apiserver may take to serve on a busy 2-core
/// machine (about 3 s when idle).
const READY_WITHIN: Duration = Duration::from_secs(90);
/// How many times a start is tried again when a probed port was taken by
/// another process in the meantime.
const START_ATTEMPTS: usize = 3;

/// A running etcd and kube-apiserver.
///
/// Fields drop in order: kube-apiserver is killed before etcd, and the
/// directory (data, PKI, logs) goes last.
pub struct ControlPlane {
    apiserver: Child,
    etcd: Child,
    url: String,
    kubeconfig: PathBuf,
    client: kube::Client,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("url", &self.url)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// The two binaries, from [`KUBE_APISERVER_ENV`] and [`ETCD_ENV`].
fn binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let path = |var: &str| -> anyhow::Result<PathBuf> {
        let path = std::env::var_os(var).map(PathBuf::from).with_context(|| {
            format!(
                "{var} is not set: `cargo xtask ci` (or `cargo xtask cluster`) builds the real \
                 control plane and sets it"
            )
        })?;
        anyhow::ensure!(path.is_file(), "{var}={} is not a file", path.display());
        Ok(path)
    };
    Ok((path(KUBE_APISERVER_ENV)?, path(ETCD_ENV)?))
}

/// A port on 127.0.0.1 nothing listens on now.
///
/// # Errors
/// When no port can be bound.
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver from the binaries the environment
    /// names, each on free loopback ports, and waits until kube-apiserver is
    /// ready and its namespaces exist.
    ///
    /// # Errors
    /// When a binary is missing or a process does not become ready within
    /// 90 s; the error holds the end of its log.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(false).await
    }

    /// As [`ControlPlane::start`], with an audit log of every request's
    /// arrival ([`ControlPlane::audit_log`], one JSON event per line at
    /// level `Metadata`, stage `RequestReceived`) and a second
    /// administrator, [`AUDITED_USER`] with [`AUDITED_TOKEN`], whose
    /// requests the log tells apart from the administrator's: for
    /// counting what a process under test asks of the API server.
    ///
    /// # Errors
    /// As [`ControlPlane::start`].
    pub async fn start_audited() -> anyhow::Result<Self> {
        Self::start_with(true).await
    }

    async fn start_with(audited: bool) -> anyhow::Result<Self> {
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(audited).await {
                Ok(plane) => return Ok(plane),
                Err(err) if format!("{err:#}").contains("address already in use") => {
                    last = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("the control plane did not start")))
    }

    async fn start_once(audited: bool) -> anyhow::Result<Self> {
        let (kube_apiserver, etcd_binary) = binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("ccm-control-plane-")
            .tempdir()?;
        let pki = pki::write(dir.path())?;
        let [etcd_port, peer_port, apiserver_port] = [free_port()?, free_port()?, free_port()?];

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd = spawn(
            Command::new(&etcd_binary)
                .arg(format!("--data-dir={}", dir.path().join("etcd").display()))
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=default={peer_url}"))
                .arg("--log-level=warn"),
            &dir.path().join("etcd.log"),
        )?;

        age_history(&format!("127.0.0.1:{etcd_port}"))
            .await
            .with_context(|| {
                format!(
                    "preparing etcd's history; its log ends:\n{}",
                    tail(&dir.path().join("etcd.log"))
                )
            })?;

        let tokens = dir.path().join("tokens.csv");
        let mut users = format!("{ADMIN_TOKEN},ccm-test-admin,ccm-test-admin,\"system:masters\"\n");
        let mut audit = Vec::new();
        if audited {
            users.push_str(&format!(
                "{AUDITED_TOKEN},{AUDITED_USER},{AUDITED_USER},\"system:masters\"\n"
            ));
            let policy = dir.path().join("audit-policy.yaml");
            std::fs::write(&policy, AUDIT_POLICY)?;
            audit.push(format!("--audit-policy-file={}", policy.display()));
            audit.push(format!(
                "--audit-log-path={}",
                dir.path().join(AUDIT_LOG).display()
            ));
        }
        std::fs::write(&tokens, users)?;
        let apiserver = spawn(
            Command::new(&kube_apiserver)
                .args(&audit)
                .arg(format!("--etcd-servers={etcd_url}"))
                .args([
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    // The default reconciler refuses a loopback advertise
                    // address (1.37 exits on it); nothing here needs the
                    // `kubernetes` Service's endpoints.
                    "--endpoint-reconciler-type=none",
                    "--authorization-mode=Node,RBAC",
                    "--service-cluster-ip-range=10.96.0.0/16",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    "--disable-admission-plugins=ServiceAccount",
                    "--profiling=false",
                    // Streaming lists (`sendInitialEvents`), which the test
                    // API server serves and its contract suite pins (on by
                    // default since 1.34; said so for any release).
                    "--feature-gates=WatchList=true",
                    "--v=1",
                ])
                .arg(format!("--secure-port={apiserver_port}"))
                .arg(format!("--cert-dir={}", dir.path().join("certs").display()))
                .arg(format!("--tls-cert-file={}", pki.serving_cert.display()))
                .arg(format!(
                    "--tls-private-key-file={}",
                    pki.serving_key.display()
                ))
                .arg(format!("--client-ca-file={}", pki.ca_cert.display()))
                .arg(format!("--token-auth-file={}", tokens.display()))
                .arg(format!(
                    "--service-account-key-file={}",
                    pki.service_account_public_key.display()
                ))
                .arg(format!(
                    "--service-account-signing-key-file={}",
                    pki.service_account_key.display()
                )),
            &dir.path().join("kube-apiserver.log"),
        )?;

        let url = format!("https://127.0.0.1:{apiserver_port}");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_yaml(&url, Some(&pki.ca_cert), "admin", ADMIN_TOKEN),
        )?;
        let client = client(&kubeconfig).await?;
        let mut plane = Self {
            apiserver,
            etcd,
            url,
            kubeconfig,
            client,
            dir,
        };
        plane.wait_ready().await?;
        Ok(plane)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            for (name, child) in [
                ("etcd", &mut self.etcd),
                ("kube-apiserver", &mut self.apiserver),
            ] {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "{name} exited ({status}) before kube-apiserver was ready; its log ends:\n{}",
                        tail(&self.dir.path().join(format!("{name}.log")))
                    );
                }
            }
            if self.ready().await {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "kube-apiserver was not ready within {READY_WITHIN:?}; its log ends:\n{}",
                    tail(&self.dir.path().join("kube-apiserver.log"))
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// `/readyz` answers ok and the namespaces every cluster has exist.
    async fn ready(&self) -> bool {
        let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
            return false;
        };
        if !self
            .client
            .request_text(request)
            .await
            .is_ok_and(|body| body.trim() == "ok")
        {
            return false;
        }
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(self.client.clone());
        for name in ["default", "kube-system"] {
            if !matches!(namespaces.get_opt(name).await, Ok(Some(_))) {
                return false;
            }
        }
        true
    }

    /// The audit log of a control plane from
    /// [`ControlPlane::start_audited`]; `None` for one without.
    pub fn audit_log(&self) -> Option<PathBuf> {
        let log = self.dir.path().join(AUDIT_LOG);
        log.exists().then_some(log)
    }

    /// kube-apiserver's URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig for the administrator (`system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// A client for the administrator.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A kubeconfig file under this control plane's directory that
    /// authenticates with `token`, for a process that must run with less
    /// than the administrator's rights.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> anyhow::Result<PathBuf> {
        let ca = self.dir.path().join("ca.crt");
        let path = self.dir.path().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, kubeconfig_yaml(&self.url, Some(&ca), name, token))?;
        Ok(path)
    }
}

/// How long etcd may take to answer its first request.
const ETCD_WITHIN: Duration = Duration::from_secs(30);

/// Gives a fresh etcd the history of a cluster that has run a while, before
/// kube-apiserver starts: one write, then its history compacted (as
/// kube-apiserver's own compaction does every five minutes). So the watch
/// caches start after revision 1, and a watch from a version before the
/// start expires from the first second, whether kube-apiserver serves it
/// from its cache or, as 1.35 and later may, from etcd. On a fresh etcd
/// its caches would start at revision 1 and replay everything since.
async fn age_history(etcd: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + ETCD_WITHIN;
    // "/ccm-test/started": outside kube-apiserver's `/registry` prefix.
    let put = r#"{"key":"L2NjbS10ZXN0L3N0YXJ0ZWQ=","value":"MQ=="}"#;
    let answer = loop {
        match etcd_post(etcd, "/v3/kv/put", put).await {
            Ok(answer) => break answer,
            Err(err) if tokio::time::Instant::now() >= deadline => {
                return Err(err.context(format!("etcd did not answer within {ETCD_WITHIN:?}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let header = &serde_json::from_str::<serde_json::Value>(&answer)
        .with_context(|| format!("etcd's put answer: {answer}"))?["header"]["revision"];
    // The gateway writes 64-bit integers as strings.
    let revision: i64 = match header {
        serde_json::Value::String(text) => text.parse()?,
        other => other
            .as_i64()
            .with_context(|| format!("no revision in etcd's answer: {answer}"))?,
    };
    let body = serde_json::json!({ "revision": revision.to_string(), "physical": true });
    etcd_post(etcd, "/v3/kv/compaction", &body.to_string()).await?;
    Ok(())
}

/// POSTs `body` to etcd's JSON gateway at `addr` (plain HTTP on loopback);
/// answers the response's body, an error for any status but 200.
async fn etcd_post(addr: &str, path: &str, body: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .with_context(|| format!("etcd did not answer POST {path} within 10 s"))??;
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    if !head.starts_with("HTTP/1.1 200") {
        bail!("etcd answered POST {path} with {answer}");
    }
    // The JSON object, whatever the transfer encoding around it.
    let json = match (rest.find('{'), rest.rfind('}')) {
        (Some(start), Some(end)) if start <= end => &rest[start..=end],
        _ => rest,
    };
    Ok(json.to_owned())
}

/// Starts `command` with its output in `log`, killed when dropped.
fn spawn(command: &mut Command, log: &Path) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {:?}", command.as_std().get_program()))
}

/// A one-cluster, one-user kubeconfig sending `token`, trusting the CA at
/// `ca` (none for plain HTTP).
pub fn kubeconfig_yaml(url: &str, ca: Option<&Path>, user: &str, token: &str) -> String {
    let ca = ca.map_or_else(String::new, |ca| {
        format!("\n    certificate-authority: {}", ca.display())
    });
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: ccm-test\n  cluster:\n    server: {url}{ca}\n\
         users:\n- name: {user}\n  user:\n    token: {token}\n\
         contexts:\n- name: ccm-test\n  context:\n    cluster: ccm-test\n    user: {user}\n\
         current-context: ccm-test\n"
    )
}

/// A client for the kubeconfig at `path`.
async fn client(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}

/// The last 60 lines of `log`.
pub(crate) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
