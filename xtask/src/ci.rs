//! `cargo xtask ci`: everything CI checks, in the order that fails fastest,
//! with each step's duration printed at the end.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::artifacts;
use crate::cluster::Suites;
use crate::cmd::{cargo, run};
use crate::disk::LowWater;
use crate::test_run::TestBinary;
use crate::test_run::pool::{self, Job};
use crate::tools;
use crate::tools::control_plane::{self, Release};

mod cpu;
mod tools_then_images;
use tools_then_images::ToolsThenImages;

/// Every check CI runs: installs missing tools, fmt, clippy, docs, all tests.
///
/// Builds as a fresh machine does, once: no incremental caches, test binaries
/// without debug info (CI's disk is finite: the run warns up front when the
/// disk looks too small, and prints the most it took at the end). What a fresh
/// machine builds from source (kube-apiserver and etcd from their Go modules,
/// output in target/ci/control-plane.log; actionlint and oras from the Go
/// module proxy) and what the tests and the images need (moto, Prism, helm,
/// kubectl; musl, cargo-auditable, skopeo, umoci, Zig, qemu) are built or
/// installed in the background at idle CPU priority from the start, cached by
/// version outside the clone, and joined by the first step that needs them.
/// Then runs: cargo fmt --check, rustdoc of the interface crate (warnings
/// denied), every target of the workspace built once with clippy linting it as
/// it compiles (clippy-driver as the workspace's compiler, warnings denied: as
/// `cargo clippy --workspace --all-targets -- -D warnings`, without compiling
/// the dependencies a second time for its check), every test run (three test
/// executables at a time: `test_run/pool.rs`), deny.toml's policy over the
/// dependency graph (licenses, bans, wildcards, sources:
/// `dependency_policy.rs`; after `cargo fetch`, which brings every platform's
/// packages for its `cargo metadata`), actionlint over the GitHub workflows,
/// `cargo xtask new-provider` into a copy of the workspace (three generated
/// providers built, linted and tested, the conformance suite included), `cargo
/// xtask chaos --quick` (the reliability suites' bounded variant), the
/// real-cluster suites against the newest supported Kubernetes release (tier
/// 5: the test API server's contract suite and every end-to-end suite, the
/// CCMs under the chart's RBAC), `cargo xtask sandbox --check`, `cargo xtask
/// chart`, `cargo xtask monitoring` (the alert rules and dashboard against a
/// real Prometheus), `cargo xtask image --check` for each provider's image
/// (their release compile started in the background at idle CPU priority once
/// its tools are in, so it uses every stretch of CPU the build, the tests and
/// the suites leave idle; its output in target/ci/images-compile.log; amd64,
/// and arm64 for the fake provider, whose arm64 binary then runs under qemu
/// against the test API server, see [`MULTI_ARCH`]; the second,
/// reproducibility compile for the AWS binary only), `cargo xtask release
/// --loopback --platform linux/amd64` (every image index with its SBOM as its
/// image's referrer, and the chart, pushed to a docker-registry on loopback
/// and read back with skopeo, oras and helm) and the fake provider's release
/// with both platforms, and `cargo xtask bench --against-upstream --quick`
/// (ours at 20 nodes, held to upstream's committed figures), the contract
/// suite against the oldest supported release (its control plane, on a fresh
/// machine, built in the background meanwhile; `--kubernetes` runs every suite
/// against one release instead). Last, `target/debug/deps` is pruned of what
/// no build of the run used (`artifacts.rs`).
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Leave out tier 5 and actionlint (for a machine without Go); says so
    /// loudly at the end.
    #[arg(long)]
    skip_real_cluster: bool,
    /// Run every real-cluster suite against this Kubernetes release (1.35,
    /// 1.36 or 1.37) instead of the default: the contract suite against the
    /// oldest supported release and every suite against the newest.
    #[arg(long, value_parser = Release::parse)]
    kubernetes: Option<Release>,
}

/// The real-cluster runs: each release with the suites run against it.
fn real_cluster_runs(kubernetes: Option<Release>) -> Vec<(Release, Suites)> {
    match kubernetes {
        Some(release) => vec![(release, Suites::All)],
        // The newest first: its suites are the longer, and the oldest's Go
        // build goes on beside them on a fresh machine.
        None => vec![
            (control_plane::NEWEST, Suites::All),
            (control_plane::OLDEST, Suites::Contract),
        ],
    }
}

/// The README's first command, as a newcomer runs it: the real binaries must
/// bring a small cluster all the way up.
const SANDBOX: &[&str] = &["sandbox", "--check"];

/// The Helm chart: lint, strict schemas, and its RBAC against the requests a
/// real CCM sends.
const CHART: &[&str] = &["chart"];

/// The chart's alert rules and dashboard: promtool's check and rule unit
/// tests, and a real Prometheus over the sandbox's CCM, bounded to three
/// minutes.
const MONITORING: &[&str] = &["monitoring", "--timeout=180"];

/// The reliability suites' bounded variant: crash points, failovers, a
/// partition and faults against real CCM processes, in at most 5 minutes.
const CHAOS: &[&str] = &["chaos", "--quick"];

/// The release, as a `v*` tag publishes it, to a registry on loopback and
/// read back: every provider's image for [`PLATFORM`]; then
/// [`RELEASE_MULTI_ARCH`].
const RELEASE: &[&str] = &["release", "--loopback", "--platform", PLATFORM];

/// [`MULTI_ARCH`]'s release alone, its index with both platforms and each
/// platform's SBOM as referrer, read back from the loopback registry.
const RELEASE_MULTI_ARCH: &[&str] = &[
    "release",
    "--loopback",
    "--provider",
    MULTI_ARCH,
    "--platform",
    BOTH,
];

/// Ours alone at 20 nodes on the real control plane and moto, failing if
/// a count goes past upstream's aws-cloud-controller-manager's committed
/// figures for the same setup.
const AGAINST_UPSTREAM: &[&str] = &["bench", "--against-upstream", "--quick"];

/// The provider whose binary CI compiles a second time and compares byte
/// for byte: the largest, and the one operators of the Go CCM most use.
const REBUILT: &str = "aws";

/// The platform CI builds every provider's image for.
const PLATFORM: &str = "linux/amd64";

/// The provider whose image CI also builds for linux/arm64 (cargo-zigbuild
/// from PyPI's ziglang), runs under qemu-user against the test API server
/// (`--version`, then nodes initialized and a load balancer provisioned:
/// `sandbox::check_binary`) and publishes as a two-platform index to the
/// loopback registry. The smallest binary: each provider's arm64 compile
/// is minutes of two cores (the AWS SDK's alone about ten), and the cross
/// build differs between providers only in which crates it compiles. Its
/// arm64 binary is not compiled twice (`--no-rebuild`): the AWS amd64
/// image's second compile is CI's reproducibility check.
///
/// Measured: a CI run with it took 87 minutes when CI itself took about
/// 70 (the arm64 compile and its image check about 14 more minutes of two
/// cores, then with a second arm64 compile), which is why it was left out
/// for a while; CI now takes about 33.
const MULTI_ARCH: &str = "fake";

/// Both platforms, as `--platform` takes them.
const BOTH: &str = "linux/amd64,linux/arm64";

/// A provider's image: built for [`PLATFORM`] (and arm64 for
/// [`MULTI_ARCH`]), read by skopeo and umoci, held to the size limit; for
/// [`REBUILT`] also rebuilt and compared byte for byte.
fn image(provider: &str) -> Vec<&str> {
    let platforms = if provider == MULTI_ARCH {
        BOTH
    } else {
        PLATFORM
    };
    let mut args = vec![
        "image",
        "--provider",
        provider,
        "--platform",
        platforms,
        "--check",
    ];
    if provider != REBUILT {
        args.push("--no-rebuild");
    }
    args
}

/// `deny.toml`'s policy over the dependency graph: licenses, bans,
/// wildcards and sources ([`crate::dependency_policy`]).
///
/// `cargo metadata` resolves the graph for every platform `deny.toml`
/// names, which needs those platforms' packages on disk (the builds fetched
/// the host's alone): `cargo fetch` takes them from crates.io first.
fn dependency_policy() -> anyhow::Result<()> {
    run(cargo().args(["fetch", "--locked"]))?;
    crate::dependency_policy::check()
}

/// actionlint over every workflow under `.github/workflows` (built from the
/// Go module proxy once per machine).
fn actionlint() -> anyhow::Result<()> {
    let binary = tools::go_install::ACTIONLINT.ensure()?;
    run(Command::new(binary)
        .current_dir(crate::cmd::repo_root())
        .arg("-verbose"))
}

/// How many test executables [`tests`] runs at once. Measured on 2 cores:
/// the workspace's 138 executables took 573 s one at a time (the longest
/// 84 s) and 246 s three at a time.
const TEST_JOBS: usize = 3;

/// The most one test executable may take before it is killed and fails.
const TEST_LIMIT: Duration = Duration::from_secs(15 * 60);

/// Every test `cargo test --workspace` runs, as it runs them (each
/// executable from its package's directory, its doc tests through cargo),
/// [`TEST_JOBS`] executables at a time, longest first; each one's output in
/// `target/ci/tests/`, printed whole when it fails.
fn tests() -> anyhow::Result<()> {
    let mut jobs: Vec<Job> = TestBinary::all()?
        .iter()
        .map(|binary| binary.job(&[]))
        .collect();
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--locked", "--doc"]);
    jobs.push(Job {
        name: "doc tests".to_owned(),
        command: doc,
    });
    pool::run(
        jobs,
        TEST_JOBS,
        TEST_LIMIT,
        &crate::cmd::target_dir().join("ci/tests"),
    )
    .map(drop)
}

/// Removes from `target/debug/deps` what no build of this run used
/// (`artifacts.rs`), xtask's own build (as `cargo xtask` makes it) kept.
fn prune() -> anyhow::Result<()> {
    artifacts::run(crate::cmd::plain_cargo().args(["build", "--locked", "-p", "xtask"]))?;
    let (files, bytes) = artifacts::prune(&crate::cmd::target_dir().join("debug/deps"))?;
    println!(
        "xtask ci: removed {files} files ({:.1} GiB) no build of this run used from target/debug/deps",
        crate::disk::gib(bytes)
    );
    Ok(())
}

/// What later steps use that a fresh machine builds from source: actionlint
/// and oras from the Go module proxy (with the real cluster's steps only).
/// cargo-auditable is not here: the images' compile needs it first, in the
/// foreground.
fn build_tools(real_cluster: bool) -> anyhow::Result<()> {
    if real_cluster {
        tools::go_install::ACTIONLINT.ensure()?;
        tools::go_install::ORAS.ensure()?;
    }
    Ok(())
}

/// Runs the task `cargo xtask <args>` names, through the same parser a user's
/// command line goes through.
fn task(args: &[&str]) -> anyhow::Result<()> {
    crate::run_task(std::iter::once("xtask").chain(args.iter().copied()))
}

/// The steps run so far, how long each took and how busy the CPUs were
/// meanwhile, and the disk they used.
struct Steps {
    done: Vec<(String, f64, Option<f64>)>,
    disk: LowWater,
    started: Option<cpu::Ticks>,
}

impl Steps {
    fn time<T>(
        &mut self,
        name: &str,
        step: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let (started, ticks) = (Instant::now(), cpu::Ticks::now());
        let result = step();
        let busy = cpu::busy_since(ticks);
        self.done
            .push((name.to_owned(), started.elapsed().as_secs_f64(), busy));
        if result.is_err() {
            self.print();
        }
        result
    }

    fn print(&self) {
        println!("\nxtask ci: step durations");
        let width = self
            .done
            .iter()
            .map(|(name, _, _)| name.len())
            .max()
            .unwrap_or_default();
        let percent = |busy: Option<f64>| {
            busy.map_or_else(String::new, |b| format!("{:>4.0}% CPU", b * 100.0))
        };
        for (name, secs, busy) in &self.done {
            println!("  {name:<width$} {secs:>7.1} s  {}", percent(*busy));
        }
        if let Some(busy) = cpu::busy_since(self.started) {
            println!(
                "xtask ci: the CPUs were {:.0}% busy over the whole run",
                busy * 100.0
            );
        }
        println!("xtask ci: {}", self.disk.summary());
    }
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    let real_cluster = !options.skip_real_cluster;
    crate::cmd::build_once();
    let mut steps = Steps {
        done: Vec::new(),
        disk: LowWater::start(&crate::cmd::repo_root()),
        started: cpu::Ticks::now(),
    };
    steps.time("rust components", tools::ensure_rust)?;
    // A fresh machine's Go build (kube-apiserver and etcd, about 14 minutes
    // alone) and its tool builds run in the background at idle priority
    // beside the Rust compile and the tests, each joined before the first
    // step that needs it; cached, they return at once.
    let control_plane_log = crate::cmd::target_dir().join("ci/control-plane.log");
    let runs = real_cluster_runs(options.kubernetes);
    let mut control_planes = if real_cluster {
        let releases = runs.iter().map(|(release, _)| *release).collect();
        let builds = control_plane::prebuild(releases, &control_plane_log);
        (runs.iter().zip(builds))
            .map(|((_, suites), (release, build))| (release, *suites, build))
            .collect()
    } else {
        Vec::new()
    };
    let built_tools = tools::background::spawn("tools", None, move || build_tools(real_cluster));
    let tools_then_images = ToolsThenImages::start(REBUILT, MULTI_ARCH)?;
    steps.time("fmt", || run(cargo().args(["fmt", "--all", "--check"])))?;
    steps.time("rustdoc", || {
        artifacts::run(
            cargo()
                .args(["doc", "--no-deps", "--locked", "-p", "ccm-cloud-provider"])
                .env("RUSTDOCFLAGS", "-D warnings"),
        )
    })?;
    // Every target at once, with the features `cargo test --workspace`
    // resolves (the tasks after it start these binaries), clippy linting
    // the workspace's crates as they compile.
    steps.time("build and clippy", || {
        crate::cmd::lint_while_building()?;
        artifacts::run(cargo().args(["build", "--workspace", "--all-targets", "--locked"]))?;
        crate::cmd::workspace_built();
        Ok(())
    })?;
    let images = steps.time("e2e and image tools (joined)", || tools_then_images.join())?;
    steps.time("tests", tests)?;
    steps.time("tools (joined)", || built_tools.join())?;
    steps.time("dependency policy", dependency_policy)?;
    if real_cluster {
        steps.time("actionlint", actionlint)?;
    }
    steps.time("new-provider", crate::new_provider::check)?;
    steps.time("chaos --quick", || task(CHAOS))?;
    // Each release's suites once its control plane is built: the first
    // here, the others last, so that on a fresh machine their Go build goes
    // on beside every step that needs none (the image checks, the release
    // and the benchmark, which wait on processes more than they compute).
    let mut real_cluster_suites = |steps: &mut Steps, count: usize| {
        for (release, suites, build) in control_planes.drain(..count.min(control_planes.len())) {
            let name = format!("control plane {} (joined)", release.minor());
            steps.time(&name, || build.join().map(drop))?;
            let name = match suites {
                Suites::Contract => format!("real kube-apiserver {} contract", release.minor()),
                Suites::All => format!("real kube-apiserver {} suites", release.minor()),
            };
            steps.time(&name, || crate::cluster::run_suites(release, suites))?;
        }
        anyhow::Ok(())
    };
    real_cluster_suites(&mut steps, 1)?;
    steps.time("sandbox --check", || task(SANDBOX))?;
    steps.time("chart", || task(CHART))?;
    steps.time("monitoring", || task(MONITORING))?;
    steps.time("images compile (joined)", || images.join())?;
    for provider in crate::image::providers() {
        steps.time("image --check", || task(&image(&provider)))?;
    }
    if real_cluster {
        steps.time("release --loopback", || task(RELEASE))?;
        steps.time("release --loopback (both platforms)", || {
            task(RELEASE_MULTI_ARCH)
        })?;
        // After the images: the AWS binary it runs is theirs, already built.
        steps.time("bench --against-upstream", || task(AGAINST_UPSTREAM))?;
    }
    real_cluster_suites(&mut steps, usize::MAX)?;
    steps.time("prune target/debug", prune)?;
    steps.print();
    if real_cluster {
        println!("\nxtask ci: all checks passed");
    } else {
        println!(
            "\nxtask ci: all checks passed EXCEPT TIER 5 AND ACTIONLINT: --skip-real-cluster left out \
             every suite against a real kube-apiserver (contract suite, end-to-end suites, chart \
             RBAC) and the workflow lint, which need Go"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasks_ci_runs_are_valid_command_lines() {
        let providers = crate::image::providers();
        let images: Vec<_> = providers.iter().map(|p| image(p)).collect();
        assert!(
            images.iter().any(|args| !args.contains(&"--no-rebuild")),
            "one provider's image is checked for reproducibility"
        );
        for args in images.iter().map(|args| &args[..]).chain([RELEASE]) {
            let both = args.contains(&MULTI_ARCH);
            let platforms = if both { BOTH } else { PLATFORM };
            assert!(
                args.windows(2).any(|w| w == ["--platform", platforms]),
                "{args:?} builds for {platforms}"
            );
            assert!(!both || args.contains(&"--no-rebuild"), "{args:?}");
        }
        assert!(
            RELEASE_MULTI_ARCH
                .windows(2)
                .any(|w| w == ["--platform", BOTH])
        );
        for args in [
            SANDBOX,
            CHART,
            MONITORING,
            CHAOS,
            RELEASE,
            RELEASE_MULTI_ARCH,
            AGAINST_UPSTREAM,
        ]
        .into_iter()
        .chain(images.iter().map(|args| &args[..]))
        {
            if let Err(err) = crate::parse_task(args) {
                panic!("cargo xtask {}: {err}", args.join(" "));
            }
        }
    }
}
