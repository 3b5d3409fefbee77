//! The `test-apiserver` binary and `kubectl`, run as processes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running `test-apiserver`, killed on drop.
pub(crate) struct Binary {
    child: Child,
    pub(crate) url: String,
    pub(crate) kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl Binary {
    /// Starts the binary with `args` plus `--kubeconfig` in a fresh
    /// directory, and waits for the URL it prints.
    pub(crate) async fn start(args: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_test-apiserver"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting test-apiserver")?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("test-apiserver printed no URL within 60s")??
            .context("test-apiserver exited before printing its URL")?;
        Ok(Self {
            child,
            url,
            kubeconfig,
            dir,
        })
    }

    /// A directory that lives as long as the server.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kube client configured from the kubeconfig the binary wrote.
    pub(crate) async fn client(&self) -> anyhow::Result<kube::Client> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Runs kubectl against `server` and answers its standard output.
pub(crate) async fn kubectl(server: &Binary, args: &[&str]) -> anyhow::Result<String> {
    ccm_test_support::kubectl(&server.kubeconfig, args).await
}

/// A kubectl command pointed at `server`.
pub(crate) fn kubectl_command(server: &Binary) -> anyhow::Result<Command> {
    ccm_test_support::kubectl_command(&server.kubeconfig)
}
