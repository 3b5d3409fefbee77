//! Stoplight Prism as a validating proxy in front of the fake API: it
//! answers 422 (with the violated field) to a request the spec rejects,
//! without forwarding it, and 500 to a fake response the spec rejects; both
//! list the violations in the `sl-violations` header.
//!
//! `cargo xtask ci` installs Prism into `target/tools/prism`.

use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::time::Duration;

/// Why Prism could not be started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Prism is not where `cargo xtask ci` installs it.
    #[error("Stoplight Prism is not installed at {}: run `cargo xtask ci`, which installs it", .0.display())]
    NotInstalled(PathBuf),
    /// The OpenAPI spec is not at its path.
    #[error("DigitalOcean's OpenAPI spec is missing at {} (set DO_OPENAPI_SPEC to its path)", .0.display())]
    SpecMissing(PathBuf),
    /// No free loopback port could be found for Prism.
    #[error("no free port on 127.0.0.1 for Prism")]
    Port(#[source] std::io::Error),
    /// The shell wrapping Prism could not be started.
    #[error("could not start Prism's wrapper shell")]
    Spawn(#[source] std::io::Error),
    /// Prism did not say it listens in time; its log so far.
    #[error("Prism did not listen on 127.0.0.1:{port} within {timeout:?}; its log:\n{log}")]
    Timeout {
        /// The port it was told to listen on.
        port: u16,
        /// How long it was given.
        timeout: Duration,
        /// Its output.
        log: String,
    },
}

/// How long Prism may take to start on a busy 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running Prism proxy. It stops when this process exits: its shell
/// wrapper kills it when the pipe held here closes.
#[derive(Debug)]
pub struct Prism {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Prism's output, including the violations it found.
    pub log: PathBuf,
    _lifeline: ChildStdin,
}

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_owned()
}

/// Where `cargo xtask ci` installs Prism (`target/tools/prism`).
pub fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("tools/prism/node_modules/.bin/prism")
}

/// DigitalOcean's OpenAPI spec, reduced to the CCM's endpoints, kept in
/// this crate's `tests/openapi/` (see its README); `DO_OPENAPI_SPEC`
/// overrides it. The path is this crate's, whichever crate's tests use it.
pub fn spec() -> PathBuf {
    std::env::var_os("DO_OPENAPI_SPEC")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openapi/do-ccm-openapi.yaml")
        })
}

/// Starts `prism proxy --errors` for `upstream` and waits until it accepts
/// connections.
///
/// # Errors
/// When Prism or the spec is missing (naming `cargo xtask ci`), or Prism
/// does not start.
pub async fn start(upstream: &str) -> Result<Prism, Error> {
    launch(&["proxy", "--errors"], Some(upstream)).await
}

/// Starts `prism mock`: DigitalOcean's API as its spec's examples answer
/// it, every request checked (violations are logged, and answered 422).
///
/// # Errors
/// As [`start`].
pub async fn start_mock() -> Result<Prism, Error> {
    launch(&["mock"], None).await
}

/// The request violations Prism logged (`Violation: request...`).
pub fn request_violations(prism: &Prism) -> Vec<String> {
    std::fs::read_to_string(&prism.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("Violation: request"))
        .map(str::to_owned)
        .collect()
}

/// How many `method path` requests Prism received (`method` lowercase, as
/// Prism logs it).
pub fn received(prism: &Prism, method: &str, path: &str) -> usize {
    let line = format!("[HTTP SERVER] {method} {path} ");
    std::fs::read_to_string(&prism.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&line))
        .count()
}

async fn launch(mode: &[&str], upstream: Option<&str>) -> Result<Prism, Error> {
    let bin = binary();
    if !bin.exists() {
        return Err(Error::NotInstalled(bin));
    }
    let spec = spec();
    if !spec.exists() {
        return Err(Error::SpecMissing(spec));
    }
    let port = ccm_test_support::free_port().map_err(Error::Port)?;
    let log = std::env::temp_dir().join(format!("prism-do-{}-{port}.log", std::process::id()));
    // The wrapper kills Prism (by its PID) and removes its log once our end
    // of its stdin closes, which happens when this test process exits,
    // however it exits.
    let script = r#"bin=$0; log=$1; shift; "$bin" "$@" >"$log" 2>&1 & prism=$!; read -r _; kill "$prism"; rm -f "$log""#;
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .arg(&bin)
        .arg(&log)
        .args(mode)
        .args(["-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .arg(&spec);
    if let Some(upstream) = upstream {
        command.arg(upstream);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(Error::Spawn)?;
    let Some(lifeline) = child.stdin.take() else {
        unreachable!("stdin is piped")
    };
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let url = format!("http://127.0.0.1:{port}");
    loop {
        // Prism's own word, not just an open port: another process could
        // have taken the port between our probe and Prism's bind.
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        if log_text.contains(&format!("Prism is listening on {url}"))
            && tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                port,
                timeout: START_TIMEOUT,
                log: log_text,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Prism {
        url,
        log,
        _lifeline: lifeline,
    })
}
