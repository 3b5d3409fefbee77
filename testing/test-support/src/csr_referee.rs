//! Go's own reading of a certificate request, for the CSR approver's
//! differential tests: [`CsrReferee`] builds and runs `go/csr-referee`
//! (Go's `encoding/pem` and `crypto/x509.ParseCertificateRequest`, as
//! kube-apiserver and the kubelet-serving signer read `spec.request`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

/// `go`: `$GO` if set, else the first of `go` on `PATH` and
/// `/usr/local/go/bin/go` that answers `go version`.
///
/// # Errors
/// When there is none, naming what installs it.
pub fn go_binary() -> anyhow::Result<PathBuf> {
    let candidates = std::env::var_os("GO")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("go"), PathBuf::from("/usr/local/go/bin/go")]);
    for go in candidates {
        let answers = Command::new(&go)
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if answers {
            return Ok(go);
        }
    }
    bail!(
        "the CSR approver's differential test runs Go's own parser, and `go` is not on PATH: \
         install Go (the toolchain `cargo xtask ci` builds kube-apiserver with) or set GO"
    )
}

/// What Go read from one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoReading {
    /// `pem.Decode` found a `CERTIFICATE REQUEST` block and
    /// `x509.ParseCertificateRequest` read it.
    pub ok: bool,
    /// Why not, when not.
    pub error: String,
    /// `CheckSignature` passed.
    pub signed: bool,
    /// `Subject.CommonName` (Go keeps the last).
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    /// As Go's `net.IP.String()` prints them.
    pub ip_addresses: Vec<String>,
    pub emails: Vec<String>,
    pub uris: Vec<String>,
}

/// Our reading, in the terms [`GoReading::agrees_with`] compares.
#[derive(Debug, Clone, Copy)]
pub struct OurReading<'a> {
    pub common_names: &'a [String],
    pub organizations: &'a [String],
    pub dns_names: &'a [String],
    pub ip_addresses: &'a [String],
    pub emails: &'a [String],
    pub uris: &'a [String],
}

impl GoReading {
    /// Whether Go read what we read: a signed request with our one common
    /// name and the same organizations and alternative names, in order.
    ///
    /// # Errors
    /// The first difference.
    pub fn agrees_with(&self, ours: OurReading<'_>) -> Result<(), String> {
        if !self.ok {
            return Err(format!("Go cannot read it: {}", self.error));
        }
        if !self.signed {
            return Err("Go finds its signature bad".to_owned());
        }
        let pairs: [(&str, &[String], &[String]); 5] = [
            ("organizations", ours.organizations, &self.organizations),
            ("DNS names", ours.dns_names, &self.dns_names),
            ("IP addresses", ours.ip_addresses, &self.ip_addresses),
            ("e-mails", ours.emails, &self.emails),
            ("URIs", ours.uris, &self.uris),
        ];
        if ours.common_names != [self.common_name.as_str()] {
            return Err(format!(
                "common names: ours {:?}, Go's {:?}",
                ours.common_names, self.common_name
            ));
        }
        for (what, ours, go) in pairs {
            if ours != go {
                return Err(format!("{what}: ours {ours:?}, Go's {go:?}"));
            }
        }
        Ok(())
    }
}

/// The referee process: one request in, one reading out, over pipes.
#[derive(Debug)]
pub struct CsrReferee {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    _dir: tempfile::TempDir,
}

impl CsrReferee {
    /// Builds the referee with the Go toolchain (standard library only, no
    /// network) and starts it.
    ///
    /// # Errors
    /// No Go, or the build fails.
    pub fn start() -> anyhow::Result<Self> {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("go/csr-referee");
        let dir = tempfile::tempdir()?;
        let binary = dir.path().join("csr-referee");
        let built = Command::new(go_binary()?)
            .args(["build", "-o"])
            .arg(&binary)
            .arg(".")
            .current_dir(&source)
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .output()
            .context("running go build")?;
        if !built.status.success() {
            bail!(
                "go build of {} failed: {}",
                source.display(),
                String::from_utf8_lossy(&built.stderr)
            );
        }
        let mut child = Command::new(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the referee")?;
        let input = child.stdin.take().context("the referee's stdin")?;
        let output = BufReader::new(child.stdout.take().context("the referee's stdout")?);
        Ok(Self {
            child,
            input,
            output,
            _dir: dir,
        })
    }

    /// Go's reading of `request` (the raw `spec.request` bytes).
    ///
    /// # Errors
    /// The referee died or answered something else than a reading.
    pub fn read(&mut self, request: &[u8]) -> anyhow::Result<GoReading> {
        use base64::Engine as _;
        let line = base64::engine::general_purpose::STANDARD.encode(request);
        writeln!(self.input, "{line}")?;
        self.input.flush()?;
        let mut answer = String::new();
        if self.output.read_line(&mut answer)? == 0 {
            bail!("the referee ended");
        }
        let value: Value = serde_json::from_str(&answer).context("the referee's answer")?;
        let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
        let list = |key: &str| -> Vec<String> {
            value[key]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(GoReading {
            ok: value["ok"].as_bool().unwrap_or(false),
            error: text("error"),
            signed: value["signed"].as_bool().unwrap_or(false),
            common_name: text("cn"),
            organizations: list("o"),
            dns_names: list("dns"),
            ip_addresses: list("ips"),
            emails: list("emails"),
            uris: list("uris"),
        })
    }
}

impl Drop for CsrReferee {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
