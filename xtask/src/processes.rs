//! The test API server and the CCM as child processes, for the sandbox and
//! the chart's RBAC check; stopped (SIGTERM, then kill) when dropped.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::http;

/// Builds the test API server and the fake CCM (debug), the two binaries
/// the sandbox, the chart's RBAC check and the monitoring run start.
pub(crate) fn build_sandbox_binaries() -> anyhow::Result<()> {
    crate::cmd::build_bins(&["ccm-test-apiserver", "fake-cloud-controller-manager"])
}

pub(crate) struct Processes {
    dir: PathBuf,
    children: Vec<(&'static str, Child)>,
}

impl Processes {
    /// Processes whose logs go to `dir`.
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            children: Vec::new(),
        }
    }

    /// Starts the test API server and returns its address, read from the
    /// URL it prints.
    pub(crate) fn start_api_server(
        &mut self,
        binary: &Path,
        kubeconfig: &Path,
        nodes: usize,
        services: usize,
    ) -> anyhow::Result<SocketAddr> {
        self.start_api_server_with(binary, kubeconfig, nodes, services, &[])
    }

    /// [`Processes::start_api_server`] with `args` added (authentication,
    /// authorization).
    pub(crate) fn start_api_server_with(
        &mut self,
        binary: &Path,
        kubeconfig: &Path,
        nodes: usize,
        services: usize,
        args: &[String],
    ) -> anyhow::Result<SocketAddr> {
        let mut child = Command::new(binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--nodes",
                &nodes.to_string(),
                "--services",
                &services.to_string(),
            ])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(File::create(self.dir.join("apiserver.log"))?)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        self.children.push(("test-apiserver", child));
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                return http::address(url);
            }
        }
        bail!(
            "test-apiserver exited without printing its URL; see {}",
            self.dir.join("apiserver.log").display()
        )
    }

    /// Starts the CCM as the sandbox runs it and returns the address of its
    /// `/metrics`.
    pub(crate) fn start_ccm(
        &mut self,
        binary: &Path,
        kubeconfig: &Path,
        cloud_config: &Path,
    ) -> anyhow::Result<SocketAddr> {
        let args = [
            format!("--cloud-config={}", cloud_config.display()),
            "--cluster-name=sandbox".to_owned(),
            "--allocate-node-cidrs=true".to_owned(),
            "--cluster-cidr=10.244.0.0/16".to_owned(),
            "--v=2".to_owned(),
        ];
        self.start_ccm_with(binary, kubeconfig, &args)
    }

    /// Starts the CCM with `args`, plus a kubeconfig and a free loopback port
    /// for its endpoints; returns the address of its `/metrics`.
    pub(crate) fn start_ccm_with(
        &mut self,
        binary: &Path,
        kubeconfig: &Path,
        args: &[String],
    ) -> anyhow::Result<SocketAddr> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(binary)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .args(["--bind-address=127.0.0.1", &format!("--secure-port={port}")])
            .stdout(Stdio::null())
            .stderr(File::create(self.dir.join("ccm.log"))?)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        self.children.push(("fake-cloud-controller-manager", child));
        Ok(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Starts `command` as `name`, its stdout and stderr in
    /// `<dir>/<name>.log`.
    pub(crate) fn start(
        &mut self,
        name: &'static str,
        command: &mut Command,
    ) -> anyhow::Result<()> {
        let log = File::create(self.dir.join(format!("{name}.log")))?;
        let child = command
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        self.children.push((name, child));
        Ok(())
    }

    /// Fails when a process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        for (name, child) in &mut self.children {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{name} exited ({status}); its log is in {}",
                    self.dir.display()
                );
            }
        }
        Ok(())
    }

    /// Stops the process called `name` (SIGTERM, then kill after 5 s) and
    /// returns how it exited.
    pub(crate) fn stop(&mut self, name: &str) -> anyhow::Result<ExitStatus> {
        let index = self
            .children
            .iter()
            .position(|(n, _)| *n == name)
            .with_context(|| format!("no process called {name}"))?;
        let (_, mut child) = self.children.remove(index);
        terminate(&mut child).with_context(|| format!("stopping {name}"))
    }
}

fn terminate(child: &mut Child) -> std::io::Result<ExitStatus> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    for _ in 0..50 {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    child.wait()
}

impl Drop for Processes {
    fn drop(&mut self) {
        // The CCM first: SIGTERM lets it release its lease.
        for (_, child) in self.children.iter_mut().rev() {
            let _ = terminate(child);
        }
    }
}
