//! The real binary as a child process, killed when its guard drops.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// The binary under test.
pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_digitalocean-cloud-controller-manager");

/// How long the CCM may take to become ready on a busy 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A port on 127.0.0.1 free right now.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a probe port")?;
    Ok(listener.local_addr()?.port())
}

/// The binary with `env` as its whole environment (nothing inherited, so a
/// developer's `DO_ACCESS_TOKEN`, `RUST_LOG` or proxy settings never leak
/// in) and `args`.
fn command(env: &[(&str, String)], args: &[String]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .env_clear()
        // Plain text logs, readable when a failing test prints them.
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs the binary to its exit (within 30 s) and answers its output.
pub(crate) async fn run_to_exit(env: &[(&str, String)], args: &[&str]) -> anyhow::Result<Output> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let output = command(env, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    tokio::time::timeout(Duration::from_secs(30), output)
        .await
        .context("the CCM did not exit within 30 s")?
        .context("running the CCM")
}

/// A running CCM. Dropping it kills the process; when the test is failing,
/// it prints the process's log first.
#[derive(Debug)]
pub(crate) struct Ccm {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl Ccm {
    /// Starts the binary with `env` as its environment and `args` plus
    /// `--bind-address=127.0.0.1 --secure-port=<free port> --v=2`, and waits
    /// until `/readyz` answers 200: the provider is initialized, this
    /// process leads and its caches are filled.
    pub(crate) async fn start(env: &[(&str, String)], args: &[String]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("ccm.log");
        let port = free_port()?;
        let mut all_args = vec![
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            "--v=2".to_owned(),
        ];
        all_args.extend_from_slice(args);
        let child = command(env, &all_args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting the CCM")?;
        let mut ccm = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
            _dir: dir,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
        };
        ccm.wait_ready().await?;
        Ok(ccm)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the CCM exited ({status}) before it was ready; its log:\n{}",
                    self.log()
                );
            }
            if self
                .get("/readyz")
                .await
                .is_ok_and(|(status, _)| status == 200)
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the CCM was not ready within {READY_TIMEOUT:?}; its log:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let response = self
            .http
            .get(format!("http://{}{path}", self.addr))
            .send()
            .await?;
        let status = response.status().as_u16();
        Ok((status, response.text().await?))
    }

    /// The text of `/metrics`.
    pub(crate) async fn metrics(&self) -> anyhow::Result<String> {
        match self.get("/metrics").await? {
            (200, body) => Ok(body),
            (status, body) => bail!("/metrics answered {status}: {body}"),
        }
    }

    /// Everything the process wrote to standard error so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM.
    pub(crate) async fn terminate(&self) -> anyhow::Result<()> {
        let pid = self.child.id().context("the CCM has already exited")?;
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .context("running kill")?;
        anyhow::ensure!(status.success(), "kill -TERM {pid} failed: {status}");
        Ok(())
    }

    /// Waits up to `timeout` for the process to exit.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .with_context(|| format!("the CCM did not exit within {timeout:?}"))?
            .context("waiting for the CCM")
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if std::thread::panicking() {
            #[allow(clippy::print_stderr, reason = "a failing test shows the CCM's log")]
            {
                eprintln!(
                    "---- digitalocean-cloud-controller-manager log ----\n{}",
                    self.log()
                );
            }
        }
    }
}
