//! `--against-upstream`: upstream's aws-cloud-controller-manager and ours
//! side by side on the real control plane and moto (the
//! `ccm-upstream-bench` runner), inside a network namespace with only
//! loopback, so that neither process can reach AWS or a metadata service.
//!
//! The full run builds upstream's binary (cached by version outside the
//! clone) and runs both; `--quick` (CI) runs ours alone at 20 nodes and
//! holds it to upstream's figures for the same setup, measured by a full
//! run and committed in `docs/benchmarks/against-upstream/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::cmd::{cargo, repo_root, run, target_dir};
use crate::image::binary;
use crate::timestamp;
use crate::tools::control_plane;
use crate::tools::upstream_aws::{self, UPSTREAM_AWS};
use crate::tools::{apt, moto};

/// The quick variant's size and quiet window, as its baseline was measured.
pub(crate) const QUICK_NODES: u16 = 20;
pub(crate) const QUICK_QUIET_SECONDS: u64 = 30;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) nodes: u16,
    pub(crate) quiet_seconds: u64,
    /// Ours alone, held to the committed upstream figures.
    pub(crate) quick: bool,
    pub(crate) publish: bool,
}

/// The committed upstream figures for `nodes` nodes and `quiet` seconds.
fn baseline(nodes: u16, quiet: u64) -> PathBuf {
    repo_root()
        .join("docs/benchmarks/against-upstream")
        .join(format!("upstream-{nodes}-nodes-{quiet}s.json"))
}

pub(crate) fn main(plan: Plan, commit: &str) -> anyhow::Result<()> {
    moto::ensure()?;
    // `ip` (iproute2) brings the namespace's loopback up; `unshare` is
    // util-linux's, on every Debian.
    if !apt::has("ip") {
        apt::install(&["iproute2"])?;
    }
    let plane = control_plane::ensure(control_plane::NEWEST)?;
    let ours = binary::build(
        "aws",
        &crate::image::metadata("aws")?,
        crate::image::Platform::Amd64,
    )?
    .0;
    // As `cargo test --workspace` builds it (CI's tests step): a build of
    // the one package would resolve the AWS SDK's features differently and
    // compile it again, for minutes.
    run(cargo().args(["test", "--workspace", "--locked", "--no-run", "--quiet"]))?;
    let runner = target_dir().join("debug").join("upstream-bench");
    let out = target_dir().join("bench").join("against-upstream");
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec![
        "--nodes".to_owned(),
        plan.nodes.to_string(),
        "--quiet-seconds".to_owned(),
        plan.quiet_seconds.to_string(),
        "--out".to_owned(),
        out.display().to_string(),
    ];
    if plan.quick {
        let baseline = baseline(plan.nodes, plan.quiet_seconds);
        anyhow::ensure!(
            baseline.exists(),
            "no upstream figures for {} nodes and a {} s quiet window ({}): run `cargo xtask bench --against-upstream --nodes {} --quiet-seconds {} --publish` once",
            plan.nodes,
            plan.quiet_seconds,
            baseline.display(),
            plan.nodes,
            plan.quiet_seconds
        );
        args.push(format!("--baseline={}", baseline.display()));
    } else {
        let upstream = upstream_aws::ensure()?;
        args.push(format!("--binary=upstream={}", upstream.display()));
    }
    args.push(format!("--binary=ours={}", ours.display()));
    isolated(&runner, &args, &plane).context(
        "the side-by-side run (its processes' logs are under target/bench/against-upstream/)",
    )?;
    if plan.publish {
        publish(&out, plan, commit)?;
    }
    Ok(())
}

/// Runs `runner` in a new network namespace whose only interface is
/// loopback, brought up first.
fn isolated(
    runner: &Path,
    args: &[String],
    plane: &control_plane::ControlPlane,
) -> anyhow::Result<()> {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--net",
        "--",
        "sh",
        "-c",
        "ip link set lo up && exec \"$0\" \"$@\"",
    ])
    .arg(runner)
    .args(args)
    .arg("--isolated")
    .env("CCM_KUBE_APISERVER", &plane.kube_apiserver)
    .env("CCM_ETCD", &plane.etcd)
    .env_remove("HTTP_PROXY")
    .env_remove("HTTPS_PROXY")
    .env_remove("http_proxy")
    .env_remove("https_proxy");
    run(&mut cmd)
}

/// Copies the figures and the table to docs/benchmarks/.
fn publish(out: &Path, plan: Plan, commit: &str) -> anyhow::Result<()> {
    let docs = repo_root().join("docs/benchmarks/against-upstream");
    std::fs::create_dir_all(&docs)?;
    let upstream = out.join("upstream.json");
    if upstream.exists() {
        std::fs::copy(&upstream, baseline(plan.nodes, plan.quiet_seconds))?;
    }
    let table = std::fs::read_to_string(out.join("table.md"))?;
    let page = docs.join(format!("{}-nodes.md", plan.nodes));
    std::fs::write(
        &page,
        format!(
            "# Upstream's aws-cloud-controller-manager {UPSTREAM_AWS} and ours, side by side: {} nodes\n\n\
             Measured by `cargo xtask bench --against-upstream --nodes {} --quiet-seconds {}` at {} (commit {commit}) on {}. \
             Each binary ran in turn on a fresh real kube-apiserver v{} (audit log: every request by the CCM's user counted as it arrived) \
             and a fresh moto behind a counting proxy, inside a network namespace with only loopback. The windows: from the CCM's start until every node is initialized; \
             then (the NLB Service created at that moment) until the Service has an ingress and every pod CIDR a route; then the quiet window.\n\n{table}",
            plan.nodes,
            plan.nodes,
            plan.quiet_seconds,
            timestamp::now(),
            {
                let m = super::machine::Machine::observe();
                format!("{} ({} cores, {} GiB)", m.cpu, m.cores, m.memory_gib)
            },
            control_plane::NEWEST.kubernetes.trim_start_matches('v'),
        ),
    )?;
    println!("xtask: published {}", page.display());
    Ok(())
}
