//! `cargo xtask chaos`: the reliability suites (testing/chaos) against real
//! CCM processes, the fake cloud's server and the test API server, and the
//! fuzz targets; the full run writes docs/reliability/report.md.

pub(crate) mod fuzz;
mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cmd::{cargo, repo_root, run, target_dir};

/// Crash points, failover, partition, faults and fuzzing, with figures.
///
/// Builds fake-cloud-controller-manager, the fake cloud's server
/// (`fake-cloud`) and the suites' driver (`chaos`), then runs each suite in
/// turn; each prints its figures and writes them to target/chaos/<suite>.json:
///   - crash-points: a replica SIGKILLed right after the k-th cloud mutation
///     of a scenario, for k = 1..=100; 0 leaked, 0 duplicated, converged;
///   - aws-crash-points: the same against AWS (moto, behind a trapping proxy),
///     aws-cloud-controller-manager killed after 25 mutations spread over its
///     scenario (the crash_points test of cmd/aws-cloud-controller-manager;
///     plain `cargo test` runs 3 of them);
///   - failover: 3 replicas with 2 s leases under churn, the leader killed or
///     frozen 100 times; no mutation outside its caller's term; failover
///     p50/p99/max (goal: p99 ≤ lease + retry period);
///   - partition: the API server refuses the leader's requests; it stops
///     mutating before its lease could expire and another takes over;
///   - faults: 60 s of 30% cloud errors and API server faults under churn,
///     then none; converged within 60 s, CPU and request rates bounded;
///   - fuzz: every cargo-fuzz target of fuzz/ for --fuzz-seconds each from
///     its committed corpus (installs the nightly toolchain and cargo-fuzz
///     when missing).
///
/// Then writes docs/reliability/report.md from the figures.
///
/// With --quick (what `cargo xtask ci` runs): 6 crash points spread over the
/// scenario, 6 failovers, 1 partition, 20 s of faults, no AWS crash points
/// (CI's test step runs 3), no fuzzing (the stable tests replay the committed
/// corpus), no report; at most 5 minutes.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// The bounded variant for CI.
    #[arg(long)]
    quick: bool,
    /// Seconds each fuzz target runs (the full run only).
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    fuzz_seconds: u64,
    /// Only these suites (crash-points, aws-crash-points, failover, partition,
    /// faults, fuzz);
    /// the report takes the others' figures from their last run.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// The suites `chaos` runs, in order.
const SUITES: [&str; 4] = ["crash-points", "failover", "partition", "faults"];
/// The AWS crash points: a test of cmd/aws-cloud-controller-manager.
const AWS_CRASH_POINTS: &str = "aws-crash-points";
/// How many AWS crash points the full run makes.
const AWS_POINTS: u32 = 25;
/// How long the quick variant may take, suites together.
const QUICK_BUDGET: Duration = Duration::from_secs(300);
/// How long one full suite may take.
const FULL_SUITE_BUDGET: Duration = Duration::from_secs(45 * 60);

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    for name in &options.only {
        if !SUITES.contains(&name.as_str()) && name != AWS_CRASH_POINTS && name != "fuzz" {
            bail!(
                "--only: no suite {name:?} (crash-points, {AWS_CRASH_POINTS}, failover, partition, faults, fuzz)"
            );
        }
    }
    let wanted = |name: &str| options.only.is_empty() || options.only.iter().any(|o| o == name);
    crate::cmd::build_bins(&[
        "fake-cloud-controller-manager",
        "ccm-provider-fake",
        "ccm-chaos",
    ])?;
    let bin = target_dir().join("debug");
    let out = target_dir().join("chaos");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let started = Instant::now();
    let mut failed = Vec::new();
    for suite in SUITES.into_iter().filter(|s| wanted(s)) {
        let budget = if options.quick {
            QUICK_BUDGET.saturating_sub(started.elapsed())
        } else {
            FULL_SUITE_BUDGET
        };
        if let Err(e) = run_suite(&bin, &out, suite, options.quick, budget) {
            println!("chaos {suite}: {e:#}");
            failed.push(suite.to_owned());
        }
    }
    if !options.quick
        && wanted(AWS_CRASH_POINTS)
        && let Err(e) = aws_crash_points(&out)
    {
        println!("chaos {AWS_CRASH_POINTS}: {e:#}");
        failed.push(AWS_CRASH_POINTS.to_owned());
    }
    if options.quick {
        println!("\nchaos --quick: {:.0} s", started.elapsed().as_secs_f64());
    } else if wanted("fuzz") {
        let figures = fuzz::run(Duration::from_secs(options.fuzz_seconds))?;
        let json = fuzz::to_json(&figures);
        std::fs::write(out.join("fuzz.json"), serde_json::to_string_pretty(&json)?)?;
        if figures.iter().any(|f| f.panics > 0) {
            failed.push("fuzz".to_owned());
        }
    }
    if !options.quick {
        // With --only, the other suites' figures come from their last run.
        let path = repo_root()
            .join("docs")
            .join("reliability")
            .join("report.md");
        report::write(&out, &path)?;
        println!("\nwrote {}", path.display());
    }
    if !failed.is_empty() {
        bail!(
            "chaos: {} missed a goal (figures in {})",
            failed.join(", "),
            out.display()
        );
    }
    Ok(())
}

/// The AWS crash points against moto: the crash_points test of
/// cmd/aws-cloud-controller-manager with [`AWS_POINTS`] points, its figures
/// in `out`.
fn aws_crash_points(out: &Path) -> anyhow::Result<()> {
    crate::tools::ensure_e2e()?;
    println!(
        "\n$ cargo test -p aws-cloud-controller-manager --test integration crash_points:: ({AWS_POINTS} points)"
    );
    let figures = figures_path(out, AWS_CRASH_POINTS);
    // Figures of an earlier run must not stand in for this one's.
    let _ = std::fs::remove_file(&figures);
    run(cargo()
        .args([
            "test",
            "--locked",
            "-p",
            "aws-cloud-controller-manager",
            "--test",
            "integration",
            "--",
            "--nocapture",
            "crash_points::",
        ])
        .env("CHAOS_AWS_CRASH_POINTS", AWS_POINTS.to_string())
        .env("CHAOS_OUT", &figures))?;
    anyhow::ensure!(
        figures.exists(),
        "the test wrote no figures to {}",
        figures.display()
    );
    Ok(())
}

/// Runs one suite within `budget`, killing it beyond.
fn run_suite(
    bin: &Path,
    out: &Path,
    suite: &str,
    quick: bool,
    budget: Duration,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        !budget.is_zero(),
        "no time left of the {QUICK_BUDGET:?} budget"
    );
    let mut command = Command::new(bin.join("chaos"));
    command
        .current_dir(repo_root())
        .arg(suite)
        .arg("--ccm")
        .arg(bin.join("fake-cloud-controller-manager"))
        .arg("--fake-cloud")
        .arg(bin.join("fake-cloud"))
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null());
    if quick {
        command.arg("--quick");
    }
    println!("\n$ chaos {suite}{}", if quick { " --quick" } else { "" });
    let mut child = command.spawn().context("starting chaos")?;
    let deadline = Instant::now() + budget;
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.success(), "{status}");
            return Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("did not finish within {budget:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The figures file of `suite` in `out`.
pub(crate) fn figures_path(out: &Path, suite: &str) -> PathBuf {
    out.join(format!("{suite}.json"))
}
