//! The `aws-cloud-controller-manager` binary as a child process: started
//! with a log file, probed over its HTTP port, signalled, and killed when
//! the test ends however it ends.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_aws-cloud-controller-manager");

/// How long the process may take to serve `/readyz` with 200.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How many log lines a failing test prints.
const LOG_TAIL: usize = 80;

/// Environment variables of the test process that would change what the
/// AWS SDK does (profiles, regions, metadata, other keys).
const AWS_ENV: &[&str] = &[
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_SESSION_TOKEN",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "KUBECONFIG",
];

/// The log levels of the CCM's log file: debug for this project's crates.
const RUST_LOG: &str = "info,ccm_app=debug,ccm_runtime=debug,ccm_controllers=debug,leader_election=debug,provider_aws=debug";

/// A running CCM. Dropping it kills the process (and, when the test is
/// failing, prints the end of its log).
#[derive(Debug)]
pub struct Ccm {
    child: Child,
    port: u16,
    log: PathBuf,
}

/// A port nothing listens on now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Where the process of test `name` writes its log.
pub fn log_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("aws-ccm-{name}.log"))
}

/// The binary run with `args`, dummy AWS keys in its environment, and its
/// output in the log of test `name`.
pub fn command(name: &str, args: &[String]) -> anyhow::Result<(Command, PathBuf)> {
    let log = log_path(name);
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env("AWS_ACCESS_KEY_ID", provider_aws::test_util::ACCESS_KEY_ID)
        .env(
            "AWS_SECRET_ACCESS_KEY",
            provider_aws::test_util::SECRET_ACCESS_KEY,
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", RUST_LOG)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true);
    for var in AWS_ENV {
        command.env_remove(var);
    }
    Ok((command, log))
}

impl Ccm {
    /// Starts the binary with `args` plus `--bind-address=127.0.0.1
    /// --secure-port=<free port>`, and waits until it is ready: it leads and
    /// its caches are filled.
    pub async fn start(name: &str, mut args: Vec<String>) -> anyhow::Result<Self> {
        let port = free_port()?;
        args.push("--bind-address=127.0.0.1".into());
        args.push(format!("--secure-port={port}"));
        let (mut command, log) = command(name, &args)?;
        let child = command.spawn().context("starting the CCM")?;
        let mut ccm = Self { child, port, log };
        ccm.wait_ready().await?;
        Ok(ccm)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the CCM exited ({status}) before it was ready:\n{}",
                    self.log_tail()
                );
            }
            if let Ok((200, _)) = self.get("/readyz").await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "the CCM was not ready within {READY_WITHIN:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `GET path` on the CCM's port: status code and body.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        get(self.port, path).await
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        match self.get("/metrics").await? {
            (200, body) => Ok(body),
            (status, body) => bail!("/metrics answered {status}: {body}"),
        }
    }

    /// Sends SIGTERM, as the kubelet does to stop a pod.
    pub async fn terminate(&self) -> anyhow::Result<()> {
        let pid = self.child.id().context("the CCM has already exited")?;
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .context("running kill")?;
        anyhow::ensure!(status.success(), "kill -TERM {pid}: {status}");
        Ok(())
    }

    /// Waits up to `timeout` for the process to exit.
    pub async fn wait(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .with_context(|| format!("the CCM did not exit within {timeout:?}"))?
            .context("waiting for the CCM")
    }

    /// The last lines of the log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if std::thread::panicking() {
            #[allow(
                clippy::print_stderr,
                reason = "a failing test shows what the process logged"
            )]
            {
                eprintln!(
                    "--- the CCM's log ({}), last {LOG_TAIL} lines ---\n{}",
                    self.log.display(),
                    self.log_tail()
                );
            }
        }
    }
}

/// The last [`LOG_TAIL`] lines of `log`.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n")
}

/// One plain HTTP/1.1 GET on 127.0.0.1:`port`, bounded to 10 s.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        anyhow::Ok(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .with_context(|| format!("GET {path}: no answer within 10s"))??;
    let response = String::from_utf8(response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("GET {path}: malformed answer {response:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("GET {path}: no status in {head:?}"))?;
    anyhow::ensure!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "GET {path}: chunked answers are not read here"
    );
    Ok((status, body.to_owned()))
}
