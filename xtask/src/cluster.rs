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

use crate::cmd::{cargo, target_dir};
use crate::tools::control_plane::{self, ControlPlane};

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
}

/// The variables that point the end-to-end suites at a real kube-apiserver.
const APISERVER_ENV: &str = "CCM_TEST_APISERVER";
const KUBE_APISERVER_ENV: &str = "CCM_KUBE_APISERVER";
const ETCD_ENV: &str = "CCM_ETCD";
const RBAC_DIR_ENV: &str = "CCM_TEST_RBAC_DIR";
/// How long a started cluster may take to write its kubeconfig.
const START_WITHIN: Duration = Duration::from_secs(180);

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    if options.suites {
        return run_suites();
    }
    let plane = control_plane::ensure()?;
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
pub(crate) fn write_chart_rbac(dir: &Path) -> anyhow::Result<()> {
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
        let yaml = render::template(Some(&values), &[], "1.33.0")?
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
pub(crate) fn run_suites() -> anyhow::Result<()> {
    let started = Instant::now();
    let plane = control_plane::ensure()?;
    let dir = target_dir().join("cluster");
    let rbac = dir.join("rbac");
    write_chart_rbac(&rbac)?;
    crate::tools::ensure_e2e()?;
    let tests = TestBinary::all()?;
    let suite = |package: &str, targets: &[&str]| -> Vec<&TestBinary> {
        tests
            .iter()
            .filter(|t| t.package == package && t.kind == "test")
            .filter(|t| targets.is_empty() || targets.contains(&t.target.as_str()))
            .collect()
    };

    let kubeconfig = dir.join("kubeconfig");
    let mut count = 0;
    {
        let _cluster = Cluster::start_with(&real_cluster_built_by_tests(), &plane, &kubeconfig)?;
        for binary in suite("crates/test-apiserver", &[]).into_iter().chain(suite(
            "cmd/fake-cloud-controller-manager",
            &["e2e", "admission"],
        )) {
            count += run_counting(
                crate::tools::kubectl::point_at(&mut binary.command(&["--ignored"]))
                    .env("KUBECONFIG", &kubeconfig),
            )?;
        }
    }
    // (package, test targets (all when empty), tests to skip).
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
    for (package, targets, skips) in per_test {
        let args: Vec<&str> = skips.iter().flat_map(|skip| ["--skip", skip]).collect();
        for binary in suite(package, targets) {
            count += run_counting(
                crate::tools::kubectl::point_at(&mut binary.command(&args))
                    .env(APISERVER_ENV, "real")
                    .env(KUBE_APISERVER_ENV, &plane.kube_apiserver)
                    .env(ETCD_ENV, &plane.etcd)
                    .env(RBAC_DIR_ENV, &rbac)
                    .env_remove("KUBECONFIG"),
            )?;
        }
    }
    println!(
        "\nxtask: {count} tests passed against a real kube-apiserver {} in {:.0} s",
        control_plane::KUBERNETES,
        started.elapsed().as_secs_f64()
    );
    anyhow::ensure!(count > 0, "no test ran against the real kube-apiserver");
    Ok(())
}

/// `real-cluster` as the workspace's test build made it (its integration
/// test makes cargo build it).
fn real_cluster_built_by_tests() -> PathBuf {
    target_dir().join("debug").join("real-cluster")
}

/// One test executable of the workspace's test build.
#[derive(Debug)]
struct TestBinary {
    /// The package's directory relative to the root (`crates/test-apiserver`).
    package: String,
    /// The target's name (`e2e` for `tests/e2e.rs`).
    target: String,
    /// The target's kind (`test` for an integration test, `lib`, `bin`).
    kind: String,
    executable: PathBuf,
    package_dir: PathBuf,
}

impl TestBinary {
    /// Builds the workspace's tests (nothing, when `cargo test --workspace`
    /// ran before) and lists their executables.
    fn all() -> anyhow::Result<Vec<Self>> {
        let out = cargo()
            .args([
                "test",
                "--workspace",
                "--locked",
                "--no-run",
                "--message-format=json-render-diagnostics",
            ])
            .stderr(Stdio::inherit())
            .output()
            .context("running cargo test --no-run")?;
        if !out.status.success() {
            bail!("cargo test --workspace --no-run failed ({})", out.status);
        }
        let root = crate::cmd::repo_root();
        let mut found = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(message) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
                continue;
            }
            let (Some(executable), Some(manifest)) = (
                message["executable"].as_str(),
                message["manifest_path"].as_str(),
            ) else {
                continue;
            };
            let package_dir = Path::new(manifest)
                .parent()
                .context("a manifest has a directory")?
                .to_owned();
            found.push(Self {
                package: package_dir
                    .strip_prefix(&root)
                    .unwrap_or(&package_dir)
                    .to_string_lossy()
                    .into_owned(),
                target: message["target"]["name"].as_str().unwrap_or("").to_owned(),
                kind: message["target"]["kind"][0]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                executable: PathBuf::from(executable),
                package_dir,
            });
        }
        Ok(found)
    }

    /// The executable with libtest's `args`, run from its package's
    /// directory as cargo runs it.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.executable);
        cmd.args(args).current_dir(&self.package_dir);
        cmd
    }
}

/// Runs a test executable with its output shown, and answers how many tests
/// passed (libtest's `N passed`).
fn run_counting(cmd: &mut Command) -> anyhow::Result<u64> {
    let shown = format!("{cmd:?}");
    println!("\n$ {shown}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start {shown}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut passed = 0;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        passed += passed_in(&line);
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(passed)
}

/// `N` from libtest's `test result: ok. N passed; ...` line, else 0.
fn passed_in(line: &str) -> u64 {
    line.strip_prefix("test result: ")
        .and_then(|rest| rest.split_once(". "))
        .and_then(|(_, rest)| rest.split_once(" passed"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::passed_in;

    #[test]
    fn passed_in_reads_libtest_summaries_only() {
        assert_eq!(
            passed_in(
                "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 1.2s"
            ),
            12
        );
        assert_eq!(passed_in("test result: FAILED. 1 passed; 2 failed;"), 1);
        assert_eq!(passed_in("running 12 tests"), 0);
    }
}
