//! The processes under test: the test API server, the fake cloud as its own
//! process (configured to behave like a real cloud, so the CCM's memory is
//! its own) and the CCM, started with xtask's [`Processes`] (stopped with
//! SIGTERM, also on error).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::driver;
use super::measurements::{self, Metrics};
use crate::processes::Processes;

/// The fake cloud server's config: about 50 ms a call, 20 calls/s before
/// it answers Throttled, and the batch size AWS and DigitalOcean declare.
pub(crate) const CLOUD_CONFIG: &str = "\
# The fake cloud of `cargo xtask bench`: behaves like a real cloud API.
[settings]
latency_ms = 50
rate_limit_qps = 20.0
rate_limit_burst = 20
batch_size = 200
auto_instances = true
";

/// The fake cloud's batch size, as in [`CLOUD_CONFIG`].
pub(crate) const BATCH_SIZE: usize = 200;
/// The fake cloud's rate limit, as in [`CLOUD_CONFIG`].
pub(crate) const CLOUD_QPS: f64 = 20.0;
/// The fake cloud's latency per call, as in [`CLOUD_CONFIG`].
pub(crate) const CLOUD_LATENCY: Duration = Duration::from_millis(50);

/// Pod CIDRs of the test API server's seeded nodes run from 10.244.0.0/16
/// on through the following /16s, past 10.255 into 10.0: only 10.0.0.0/8
/// holds them all.
const CLUSTER_CIDR: &str = "10.0.0.0/8";

/// The CCM's client-side rate limit towards the API server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum KubeApiQps {
    /// Upstream's defaults, `--kube-api-qps=20 --kube-api-burst=30`.
    Default,
    /// Raised, so the CCM's own speed shows.
    Raised { qps: u32, burst: u32 },
}

impl KubeApiQps {
    /// The raised setting the benchmark uses.
    pub(crate) const RAISED: Self = Self::Raised {
        qps: 1000,
        burst: 2000,
    };

    /// The flags, as the report shows them.
    pub(crate) fn describe(self) -> String {
        match self {
            Self::Default => "default flags (--kube-api-qps=20 --kube-api-burst=30)".to_owned(),
            Self::Raised { qps, burst } => {
                format!("default flags but --kube-api-qps={qps} --kube-api-burst={burst}")
            }
        }
    }

    /// The setting, short.
    pub(crate) fn short(self) -> String {
        match self {
            Self::Default => "qps 20 (default)".to_owned(),
            Self::Raised { qps, .. } => format!("qps {qps}"),
        }
    }

    /// A short name for scenario IDs.
    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::Default => "qps20",
            Self::Raised { .. } => "qps-raised",
        }
    }

    /// The client-side QPS.
    pub(crate) fn qps(self) -> f64 {
        match self {
            Self::Default => 20.0,
            Self::Raised { qps, .. } => f64::from(qps),
        }
    }

    fn args(self) -> Vec<String> {
        match self {
            Self::Default => Vec::new(),
            Self::Raised { qps, burst } => vec![
                format!("--kube-api-qps={qps}"),
                format!("--kube-api-burst={burst}"),
            ],
        }
    }
}

/// Where the binaries are.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    pub(crate) api_server: PathBuf,
    pub(crate) ccm: PathBuf,
    /// The fake cloud's server, `fake-cloud`.
    pub(crate) cloud: PathBuf,
}

/// How long the fake cloud's server may take to accept connections.
const CLOUD_START: Duration = Duration::from_secs(10);

/// A running API server, and the CCM once started.
pub(crate) struct Cluster {
    pub(crate) dir: PathBuf,
    processes: Processes,
    binaries: Binaries,
    kubeconfig: PathBuf,
    cloud_config: PathBuf,
    pub(crate) api: SocketAddr,
    ccm: Option<Ccm>,
}

/// The CCM process under measurement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ccm {
    pub(crate) metrics: SocketAddr,
    pub(crate) pid: u32,
    pub(crate) started: Instant,
}

const CCM: &str = "fake-cloud-controller-manager";

impl Cluster {
    /// Starts the test API server in `dir` (logs, kubeconfig, cloud
    /// configs), seeded with `nodes` fresh kubelet registrations with pod
    /// CIDRs, and the fake cloud's server.
    pub(crate) fn start(dir: &Path, binaries: &Binaries, nodes: usize) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let kubeconfig = dir.join("kubeconfig");
        let mut processes = Processes::new(dir);
        let api = processes.start_api_server(&binaries.api_server, &kubeconfig, nodes, 0)?;
        let cloud = start_cloud(&mut processes, dir, &binaries.cloud)?;
        let cloud_config = dir.join("cloud.toml");
        std::fs::write(
            &cloud_config,
            format!(
                "# The CCM's cloud config: the bench's fake cloud server.\n[server]\nurl = \"http://{cloud}\"\n"
            ),
        )?;
        Ok(Self {
            dir: dir.to_owned(),
            processes,
            binaries: binaries.clone(),
            kubeconfig,
            cloud_config,
            api,
            ccm: None,
        })
    }

    /// An API server with `nodes` nodes, initialized by a CCM that runs only
    /// the cloud-node controller, fast, and is then stopped. With pod CIDRs,
    /// the nodes are the test API server's seeded ones; without, the driver
    /// registers them. That CCM makes no route and no load balancer, so the
    /// next one starts with none in the fake cloud.
    pub(crate) fn prepared(
        dir: &Path,
        binaries: &Binaries,
        nodes: usize,
        pod_cidrs: bool,
    ) -> anyhow::Result<Self> {
        let mut cluster = Self::start(dir, binaries, if pod_cidrs { nodes } else { 0 })?;
        if !pod_cidrs {
            let indices: Vec<usize> = (1..=nodes).collect();
            driver::register_nodes(cluster.api, &indices, false)?;
        }
        let prep = cluster.start_ccm(KubeApiQps::RAISED, Some("cloud-node"))?;
        let initialized =
            driver::poll(Duration::from_secs(600), Duration::from_millis(500), || {
                cluster.check_alive()?;
                let initialized = Metrics::read(prep.metrics)?.nodes_initialized();
                Ok((initialized >= nodes as u64).then_some(()))
            })?;
        cluster.stop_ccm()?;
        let census = driver::node_census(cluster.api)?;
        if initialized.is_none() || census.initialized != nodes {
            bail!(
                "preparing the cluster: {} of {nodes} nodes initialized",
                census.initialized
            );
        }
        Ok(cluster)
    }

    /// Starts the CCM with its default flags (but `qps`, and only
    /// `controllers` when given), waits until it leads and its controllers
    /// run, and returns it.
    pub(crate) fn start_ccm(
        &mut self,
        qps: KubeApiQps,
        controllers: Option<&str>,
    ) -> anyhow::Result<Ccm> {
        self.start_ccm_with(qps, controllers, &[])
    }

    /// [`Cluster::start_ccm`] with `extra` flags.
    pub(crate) fn start_ccm_with(
        &mut self,
        qps: KubeApiQps,
        controllers: Option<&str>,
        extra: &[String],
    ) -> anyhow::Result<Ccm> {
        if self.ccm.is_some() {
            bail!("a CCM is already running");
        }
        let mut args = vec![
            format!("--cloud-config={}", self.cloud_config.display()),
            format!("--cluster-cidr={CLUSTER_CIDR}"),
        ];
        args.extend(qps.args());
        if let Some(controllers) = controllers {
            args.push(format!("--controllers={controllers}"));
        }
        args.extend(extra.iter().cloned());
        let started = Instant::now();
        let metrics = self
            .processes
            .start_ccm_with(&self.binaries.ccm, &self.kubeconfig, &args)?;
        let pid = measurements::child_pid(&self.binaries.ccm)?;
        let expected = controllers.map_or(4, |c| c.split(',').count());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            self.processes.check_alive()?;
            if let Ok(m) = Metrics::read(metrics)
                && m.running_controllers() >= expected
            {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the CCM did not start its controllers within 30 s; see {}",
                    self.dir.join("ccm.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let ccm = Ccm {
            metrics,
            pid,
            started,
        };
        self.ccm = Some(ccm);
        Ok(ccm)
    }

    /// Stops the CCM (SIGTERM: it releases its lease).
    pub(crate) fn stop_ccm(&mut self) -> anyhow::Result<()> {
        if self.ccm.take().is_some() {
            self.processes.stop(CCM)?;
        }
        Ok(())
    }

    /// Fails, saying why, when the CCM or the API server has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        self.processes
            .check_alive()
            .map_err(|err| match last_error(&self.dir.join("ccm.log")) {
                Some(line) => err.context(format!("the CCM's last error: {line}")),
                None => err,
            })
    }
}

/// Starts the fake cloud's server (`fake-cloud`, its config
/// [`CLOUD_CONFIG`]) on a free loopback port and returns its address once
/// it accepts connections.
fn start_cloud(processes: &mut Processes, dir: &Path, binary: &Path) -> anyhow::Result<SocketAddr> {
    let config = dir.join("fake-cloud.toml");
    std::fs::write(&config, CLOUD_CONFIG)?;
    let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut command = std::process::Command::new(binary);
    command
        .args(["--listen", &addr.to_string(), "--cloud-config"])
        .arg(&config)
        .stdin(std::process::Stdio::null());
    processes.start("fake-cloud", &mut command)?;
    let deadline = Instant::now() + CLOUD_START;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        processes.check_alive()?;
        if Instant::now() > deadline {
            bail!(
                "the fake cloud did not accept connections within {CLOUD_START:?}; see {}",
                dir.join("fake-cloud.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(addr)
}

/// The last ERROR line of a log, without terminal colours.
fn last_error(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .map(strip_ansi)
        .rfind(|l| l.contains("ERROR") || l.starts_with(CCM))
        .map(|l| l.trim().to_owned())
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An escape sequence runs to its final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_from_log_lines() {
        let line = "\u{1b}[2m2026\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m lost leadership";
        assert_eq!(strip_ansi(line), "2026 ERROR lost leadership");
    }

    #[test]
    fn qps_flags_are_only_added_when_raised() {
        assert!(KubeApiQps::Default.args().is_empty());
        assert_eq!(
            KubeApiQps::RAISED.args(),
            ["--kube-api-qps=1000", "--kube-api-burst=2000"]
        );
    }
}
