//! A CCM binary as a child process: started with exactly the environment
//! the test gives it and its output in a log file, probed over its HTTPS
//! port, signalled, and killed when the test ends however it ends.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::control_plane::free_port;

/// How long the process may take to serve `/readyz` with 200 on a busy
/// 2-core machine.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How many log lines a failing test prints.
const LOG_TAIL: usize = 80;
/// How long a process run to its exit may take.
const EXIT_WITHIN: Duration = Duration::from_secs(30);

/// How to run a CCM binary.
#[derive(Debug, Clone)]
pub struct Launch {
    binary: PathBuf,
    log: PathBuf,
    env: Vec<(String, String)>,
    args: Vec<String>,
    rbac_limited: bool,
    metrics_always_allowed: bool,
}

impl Launch {
    /// `binary`, logging to `log`, with an empty environment but for
    /// `NO_COLOR` (nothing inherited: a developer's `RUST_LOG`, cloud
    /// credentials or proxy settings never leak in).
    pub fn new(binary: impl Into<PathBuf>, log: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            log: log.into(),
            env: vec![("NO_COLOR".to_owned(), "1".to_owned())],
            args: Vec::new(),
            rbac_limited: false,
            metrics_always_allowed: true,
        }
    }

    /// Adds the variable `key=value` to the process's environment.
    #[must_use]
    pub fn env(mut self, key: &str, value: impl Into<String>) -> Self {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    /// Adds `args` to the command line.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Leaves `/metrics` behind authorization: [`Launch::spawn`] adds
    /// nothing to `--authorization-always-allow-paths`. [`Ccm::metrics`]
    /// and [`Launch::start`] then need the test to grant anonymous access,
    /// so a test of `/metrics`'s authorization spawns and waits itself.
    #[must_use]
    pub fn metrics_behind_authorization(mut self) -> Self {
        self.metrics_always_allowed = false;
        self
    }

    /// Runs with the kubeconfig of `credentials`; when they are the chart's
    /// least-privilege ones, any `forbidden` answer in the log fails the
    /// test when the process is dropped.
    #[must_use]
    pub fn credentials(mut self, credentials: &crate::Credentials) -> Self {
        self.args
            .push(format!("--kubeconfig={}", credentials.kubeconfig.display()));
        self.rbac_limited = credentials.rbac_limited;
        self
    }

    /// The command, its output going to the log.
    ///
    /// # Errors
    /// When the log cannot be created.
    pub fn command(&self) -> anyhow::Result<Command> {
        let out = std::fs::File::create(&self.log)
            .with_context(|| format!("creating {}", self.log.display()))?;
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true);
        Ok(command)
    }

    /// Runs the process to its exit (within 30 s): its status and its log.
    ///
    /// # Errors
    /// When it cannot start or does not exit in time.
    pub async fn run_to_exit(&self) -> anyhow::Result<(ExitStatus, String)> {
        let status = tokio::time::timeout(EXIT_WITHIN, self.command()?.status())
            .await
            .with_context(|| format!("the CCM did not exit within {EXIT_WITHIN:?}"))?
            .context("running the CCM")?;
        Ok((status, std::fs::read_to_string(&self.log)?))
    }

    /// Runs the process to its exit with its output piped rather than
    /// logged.
    ///
    /// # Errors
    /// When it cannot start or does not exit in time.
    pub async fn output(&self) -> anyhow::Result<Output> {
        let mut command = self.command()?;
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        tokio::time::timeout(EXIT_WITHIN, command.output())
            .await
            .with_context(|| format!("the CCM did not exit within {EXIT_WITHIN:?}"))?
            .context("running the CCM")
    }

    /// Starts the process with `--bind-address=127.0.0.1
    /// --secure-port=<free port>` added, and waits until it leads and
    /// `/readyz` answers 200: the provider is up, the controllers started and
    /// their caches filled.
    ///
    /// # Errors
    /// When it exits first or is not ready within 60 s; the error holds the
    /// end of its log.
    pub async fn start(self) -> anyhow::Result<Ccm> {
        let mut ccm = self.spawn()?;
        ccm.wait_ready().await?;
        Ok(ccm)
    }

    /// Starts the process with `--bind-address=127.0.0.1
    /// --secure-port=<free port>` added, and (unless
    /// [`Launch::metrics_behind_authorization`]) `/metrics` added to
    /// `--authorization-always-allow-paths` so the harness reads it without
    /// a token; without waiting for anything.
    ///
    /// # Errors
    /// When it cannot start.
    pub fn spawn(mut self) -> anyhow::Result<Ccm> {
        let port = free_port()?;
        self.args.push("--bind-address=127.0.0.1".to_owned());
        self.args.push(format!("--secure-port={port}"));
        if self.metrics_always_allowed {
            self.args.push(
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
            );
        }
        let child = self.command()?.spawn().context("starting the CCM")?;
        Ok(Ccm {
            child,
            port,
            log: self.log,
            rbac_limited: self.rbac_limited,
        })
    }
}

/// A running CCM. Dropping it kills the process and, when the test is
/// failing, prints the end of its log.
#[derive(Debug)]
pub struct Ccm {
    child: Child,
    port: u16,
    log: PathBuf,
    rbac_limited: bool,
}

impl Ccm {
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the CCM exited ({status}) before it was ready; its log ends:\n{}",
                    self.log_tail()
                );
            }
            if self.leads().await
                && let Ok((200, _)) = self.get("/readyz").await
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the CCM was not leading and ready within {READY_WITHIN:?}; its log ends:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether the process leads: it has started (or turned off) its
    /// controllers, which it reports in `/metrics` only once leading. A
    /// standby is ready too, so `/readyz` alone does not say.
    async fn leads(&self) -> bool {
        self.metrics()
            .await
            .is_ok_and(|m| m.contains("ccm_controller_running{"))
    }

    /// The port it serves HTTPS on (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `GET path` on the CCM's port: status code and body.
    ///
    /// # Errors
    /// When nothing answers within 10 s or the answer is malformed.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        get(self.port, path).await
    }

    /// The `/metrics` text.
    ///
    /// # Errors
    /// When `/metrics` does not answer 200.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        match self.get("/metrics").await? {
            (200, body) => Ok(body),
            (status, body) => bail!("/metrics answered {status}: {body}"),
        }
    }

    /// Sends SIGTERM, as the kubelet does to stop a pod.
    ///
    /// # Errors
    /// When the process has exited or `kill` fails.
    pub async fn terminate(&self) -> anyhow::Result<()> {
        self.signal("TERM").await
    }

    /// The process ID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends the signal `name` (`KILL`, `STOP`, `CONT`, `TERM`).
    ///
    /// # Errors
    /// When the process has exited or `kill` fails.
    pub async fn signal(&self, name: &str) -> anyhow::Result<()> {
        let pid = self.child.id().context("the CCM has already exited")?;
        let status = Command::new("kill")
            .args([format!("-{name}"), pid.to_string()])
            .status()
            .await
            .context("running kill")?;
        anyhow::ensure!(status.success(), "kill -{name} {pid}: {status}");
        Ok(())
    }

    /// Waits up to `timeout` for the process to exit.
    ///
    /// # Errors
    /// When it does not exit in time.
    pub async fn wait(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .with_context(|| format!("the CCM did not exit within {timeout:?}"))?
            .context("waiting for the CCM")
    }

    /// The process's exit status if it has exited, without waiting.
    ///
    /// # Errors
    /// When its status cannot be read.
    pub fn exited(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
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
            return;
        }
        if self.rbac_limited {
            let log = self.log();
            let refused = forbidden_lines(&log);
            assert!(
                refused.is_empty(),
                "the CCM, running with the chart's RBAC, was refused by kube-apiserver:\n{}",
                refused.join("\n")
            );
        }
    }
}

/// The lines of a CCM log that report an answer 403 Forbidden.
pub fn forbidden_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("forbidden") || lower.contains("code: 403")
        })
        .collect()
}

/// The last [`LOG_TAIL`] lines of `log`.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n")
}

/// One HTTP/1.1 GET over TLS on 127.0.0.1:`port`, bounded to 10 s. The
/// CCM's certificate is self-signed: any certificate is accepted.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
        let mut stream = tokio_rustls::TlsConnector::from(ccm_loopback_tls::client_config(&[])?)
            .connect(rustls::pki_types::ServerName::try_from("localhost")?, tcp)
            .await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        match stream.read_to_end(&mut response).await {
            // A peer that closes without TLS's close_notify has still sent
            // the whole answer of a `Connection: close` exchange.
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {
            }
            other => {
                other?;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::forbidden_lines;

    #[test]
    fn forbidden_lines_finds_refusals_in_any_case_and_nothing_else() {
        let log = "INFO started\nWARN patching node: ApiError: nodes \"a\" is forbidden: User \
                   cannot patch (Forbidden)\nINFO 4030 items, 403 of them new\nERROR Status { code: 403 }\n";
        assert_eq!(
            forbidden_lines(log),
            [
                "WARN patching node: ApiError: nodes \"a\" is forbidden: User cannot patch (Forbidden)",
                "ERROR Status { code: 403 }"
            ]
        );
    }
}
