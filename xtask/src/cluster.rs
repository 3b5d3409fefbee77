//! `cargo xtask cluster`: the real control plane (kube-apiserver and etcd,
//! built from their Go modules) on loopback until Ctrl-C; and what CI runs
//! against it (tier 5).
//!
//! The processes themselves are started by `ccm-test-support`'s
//! `real-cluster` binary, the same code the end-to-end suites use to start
//! a control plane per test, so there is one way to start it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cmd::target_dir;
use crate::test_run::{TestBinary, pool, run_counting};
use crate::tools::control_plane::{self, ControlPlane, Release};

/// The real kube-apiserver and etcd on loopback (built from Go modules) until Ctrl-C.
///
/// Builds kube-apiserver and etcd from their Go modules when they are not cached
/// yet (the first time: about 12 minutes on 2 cores), starts both on loopback
/// with a throw-away CA, a static administrator token, a service-account signing
/// key and the RBAC authorizer, writes the administrator's kubeconfig to
/// target/cluster/kubeconfig and runs until Ctrl-C, then stops both.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Instead, run what `cargo xtask ci` runs against the real control
    /// plane (tier 5) and stop: the test API server's contract suite,
    /// and every end-to-end suite with the CCM under the chart's RBAC.
    #[arg(long, verbatim_doc_comment)]
    suites: bool,
    /// The Kubernetes release to run: 1.35, 1.36 or 1.37 (built from its Go
    /// modules the first time, each cached by version).
    #[arg(long, value_parser = Release::parse, default_value_t = control_plane::NEWEST)]
    kubernetes: Release,
}

/// Which of the real-cluster suites to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suites {
    /// The test API server's contract suite and the fake binary's
    /// end-to-end suite against one shared cluster: what CI runs against
    /// the oldest supported release.
    Contract,
    /// Those, then every end-to-end suite with a control plane per test.
    All,
}

/// The variables that point the end-to-end suites at a real kube-apiserver.
const APISERVER_ENV: &str = "CCM_TEST_APISERVER";
const KUBE_APISERVER_ENV: &str = "CCM_KUBE_APISERVER";
const ETCD_ENV: &str = "CCM_ETCD";
const RBAC_DIR_ENV: &str = "CCM_TEST_RBAC_DIR";
/// How many of the suites that start a control plane per test run at once
/// (each executable runs two tests at a time: up to six control planes).
const SUITE_JOBS: usize = 3;
/// The most one such suite may take before it is killed and fails.
const SUITE_LIMIT: Duration = Duration::from_secs(15 * 60);
/// How long a started cluster may take to write its kubeconfig.
const START_WITHIN: Duration = Duration::from_secs(180);

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    if options.suites {
        return run_suites(options.kubernetes, Suites::All);
    }
    let plane = control_plane::ensure(options.kubernetes)?;
    let kubeconfig = target_dir().join("cluster").join("kubeconfig");
    let mut cluster = Cluster::start(&plane, &kubeconfig)?;
    println!(
        "\nThe real control plane is up (Ctrl-C stops it):\n  \
         kubectl --kubeconfig {} get --raw /version",
        kubeconfig.display()
    );
    // Ctrl-C reaches the whole process group: the cluster stops itself.
    let status = cluster.child.wait()?;
    if !status.success() {
        bail!("real-cluster exited ({status})");
    }
    Ok(())
}

/// The `real-cluster` binary, built on demand.
fn real_cluster_binary() -> anyhow::Result<PathBuf> {
    crate::cmd::build_bins(&["ccm-test-support"])?;
    Ok(target_dir().join("debug").join("real-cluster"))
}

/// A running control plane; stopped (SIGTERM, then kill) when dropped.
pub(crate) struct Cluster {
    child: Child,
}

impl Cluster {
    /// Builds `real-cluster`, starts the control plane and waits until its
    /// kubeconfig is written.
    pub(crate) fn start(plane: &ControlPlane, kubeconfig: &Path) -> anyhow::Result<Self> {
        Self::start_with(&real_cluster_binary()?, plane, kubeconfig)
    }

    /// As [`Cluster::start`], with `binary` as `real-cluster`.
    fn start_with(binary: &Path, plane: &ControlPlane, kubeconfig: &Path) -> anyhow::Result<Self> {
        let _ = std::fs::remove_file(kubeconfig);
        let mut child = Command::new(binary)
            .arg(kubeconfig)
            .env(KUBE_APISERVER_ENV, &plane.kube_apiserver)
            .env(ETCD_ENV, &plane.etcd)
            .stdout(Stdio::piped())
            .spawn()
            .context("starting real-cluster")?;
        let stdout = child.stdout.take().context("real-cluster has no stdout")?;
        let cluster = Self { child };
        let started = Instant::now();
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            println!("{line}");
            if kubeconfig.exists() {
                return Ok(cluster);
            }
            if started.elapsed() > START_WITHIN {
                break;
            }
        }
        bail!("the real control plane did not start; see real-cluster's message above")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The chart's ServiceAccount and RBAC for each example values file
/// `ci/<name>-values.yaml` (a provider, or a provider's variant such as
/// `fake-csr-approver`), written to `dir/<name>.yaml` (a JSON `List`, which
/// kubectl applies as it is).
pub(crate) fn write_chart_rbac(dir: &Path, release: Release) -> anyhow::Result<()> {
    use crate::chart::render;
    const KINDS: &[&str] = &[
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    crate::tools::helm::ensure()?;
    crate::tools::kubernetes_validate::ensure()?;
    std::fs::create_dir_all(dir)?;
    for values in render::ci_values()? {
        let Some(name) = values
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix("-values.yaml"))
            .map(str::to_owned)
        else {
            continue;
        };
        let yaml = render::template(
            Some(&values),
            &[],
            release.kubernetes.trim_start_matches('v'),
        )?
        .map_err(|e| anyhow::anyhow!("helm template -f {}: {e}", values.display()))?;
        let items: Vec<Value> = render::documents(&yaml)?
            .into_iter()
            .filter(|d| d["kind"].as_str().is_some_and(|k| KINDS.contains(&k)))
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        std::fs::write(
            dir.join(format!("{name}.yaml")),
            serde_json::to_vec_pretty(&list)?,
        )?;
    }
    Ok(())
}

/// Tier 5, as CI runs it: the test API server's contract suite and the fake
/// binary's end-to-end suite against one real cluster through `KUBECONFIG`;
/// then every end-to-end suite (fake, AWS on moto, DigitalOcean on its fake
/// API) with a real control plane started per test and the CCM under the
/// chart's RBAC. Prints how many tests ran against kube-apiserver.
///
/// The tests are the executables of the workspace's own test build (`cargo
/// test --workspace`), run as cargo would run them: a `cargo test -p X`
/// would resolve features for X alone and rebuild half the dependency tree.
pub(crate) fn run_suites(release: Release, suites: Suites) -> anyhow::Result<()> {
    let started = Instant::now();
    let plane = control_plane::ensure(release)?;
    let dir = target_dir().join("cluster");
    let rbac = dir.join("rbac");
    write_chart_rbac(&rbac, release)?;
    crate::tools::ensure_e2e()?;
    let tests = TestBinary::all()?;
    // A package's integration test executables (one per package, its
    // suites the modules).
    let suite = |package: &str| -> Vec<&TestBinary> {
        tests
            .iter()
            .filter(|t| t.package == package && t.kind == "test")
            .collect()
    };

    let kubeconfig = dir.join("kubeconfig");
    let mut count = 0;
    {
        let _cluster = Cluster::start_with(&real_cluster_built_by_tests(), &plane, &kubeconfig)?;
        // (package, the modules of its tests to run; all when empty).
        let shared: [(&str, &[&str]); 2] = [
            ("testing/test-apiserver", &[]),
            ("cmd/fake-cloud-controller-manager", &["e2e", "admission"]),
        ];
        for (package, modules) in shared {
            for binary in suite(package) {
                // One module at a time: the modules' tests share the
                // cluster, and only one module's tests are written to run
                // beside each other.
                for (module, names) in binary.tests_by_module(true)? {
                    if !modules.is_empty() && !modules.contains(&module.as_str()) {
                        continue;
                    }
                    let mut args = vec!["--ignored", "--exact"];
                    args.extend(names.iter().map(String::as_str));
                    count += run_counting(binary.command(&args).env("KUBECONFIG", &kubeconfig))?;
                }
            }
        }
    }
    if suites == Suites::Contract {
        return finish(count, release, started);
    }
    // (package, the modules of its tests to run (all when empty), tests to
    // skip).
    let per_test: [(&str, &[&str], &[&str]); 3] = [
        (
            "cmd/fake-cloud-controller-manager",
            &["e2e", "csr_approver"],
            &[],
        ),
        // Refused before any connection: no API server involved.
        (
            "cmd/aws-cloud-controller-manager",
            &[],
            &["an_unknown_cloud_config_key"],
        ),
        (
            "cmd/digitalocean-cloud-controller-manager",
            &[],
            &[
                "a_missing_access_token",
                "a_bad_flag",
                "without_a_cluster_id",
            ],
        ),
    ];
    let mut jobs = Vec::new();
    for (package, modules, skips) in per_test {
        // One job per module, as there was one per executable: the pool
        // spreads the long ones (the call budgets, the crash points)
        // over its slots.
        for binary in suite(package) {
            for (module, names) in binary.tests_by_module(false)? {
                if !modules.is_empty() && !modules.contains(&module.as_str()) {
                    continue;
                }
                // `--skip` would match exactly under `--exact`: the skipped
                // tests are left out of the names instead.
                let kept: Vec<&str> = (names.iter().map(String::as_str))
                    .filter(|name| !skips.iter().any(|skip| name.contains(skip)))
                    .collect();
                if kept.is_empty() {
                    continue;
                }
                let args: Vec<&str> = ["--exact"].into_iter().chain(kept).collect();
                let mut job = binary.job(&args);
                job.name = format!("{} {module}", job.name);
                jobs.push(job);
            }
        }
    }
    for job in &mut jobs {
        job.command
            .env(APISERVER_ENV, "real")
            .env(KUBE_APISERVER_ENV, &plane.kube_apiserver)
            .env(ETCD_ENV, &plane.etcd)
            .env(RBAC_DIR_ENV, &rbac)
            .env_remove("KUBECONFIG");
    }
    count += pool::run(jobs, SUITE_JOBS, SUITE_LIMIT, &dir.join("suites"))?;
    finish(count, release, started)
}

/// Says how many tests passed against `release`; fails when none ran.
fn finish(count: u64, release: Release, started: Instant) -> anyhow::Result<()> {
    println!(
        "\nxtask: {count} tests passed against a real kube-apiserver {} in {:.0} s",
        release.kubernetes,
        started.elapsed().as_secs_f64()
    );
    anyhow::ensure!(
        count > 0,
        "no test ran against the real kube-apiserver {}",
        release.kubernetes
    );
    Ok(())
}

/// `real-cluster` as the workspace's test build made it (its integration
/// test makes cargo build it).
fn real_cluster_built_by_tests() -> PathBuf {
    target_dir().join("debug").join("real-cluster")
}
