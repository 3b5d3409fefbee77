//! Fuzzing: every cargo-fuzz target of `fuzz/` (one per function of
//! `testing/fuzz-targets`) for a bounded time from its committed corpus,
//! with the executions and panics of each.
//!
//! libFuzzer writes the inputs it finds to the first corpus directory it is
//! given and only reads the others, so each run gets a scratch directory
//! under `target/fuzz/corpus/<target>/` first and the committed
//! `fuzz/corpus/<target>/` second: the committed corpus changes only by
//! hand. A crash leaves its input in `fuzz/artifacts/<target>/`; each run's
//! output is kept in `target/fuzz/logs/<target>.log`.
//!
//! Needs the nightly toolchain and cargo-fuzz, installed when missing.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use crate::cmd;

const TOOLCHAIN: &str = "nightly";

/// cargo-fuzz's build options, the same for `build` and `run` so a run
/// reuses the build. No sanitizer: the code under test is safe Rust
/// (`unsafe_code = "forbid"`) and what is sought is panics, which libFuzzer
/// catches without one; AddressSanitizer would double the build's memory
/// and halve the executions.
const BUILD_OPTIONS: [&str; 2] = ["--sanitizer", "none"];

/// Beyond the fuzzing time, how long a run may take before it is stopped:
/// enough to build a target whose build is stale (the AWS SDK, on 2
/// cores) and for libFuzzer to finish.
const BUILD_ALLOWANCE: Duration = Duration::from_secs(10 * 60);

/// Seconds one input may run before libFuzzer reports it as a hang
/// (its default, 20 minutes, would outlast the run).
const INPUT_TIMEOUT_SECS: u64 = 30;

/// The artifacts libFuzzer writes for a finding: a panic or other crash, a
/// hang, running out of memory, a leak.
const FINDINGS: &[&str] = &["crash-", "timeout-", "oom-", "leak-"];

/// What one target's run did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figure {
    pub(crate) target: String,
    /// Fuzzing time, as libFuzzer reports it (the process's when it does not).
    pub(crate) seconds: f64,
    /// Inputs run (libFuzzer's `stat::number_of_executed_units`).
    pub(crate) executions: u64,
    /// Findings: a panic or other crash, a hang, an out-of-memory, or a run
    /// that had to be stopped. libFuzzer stops at the first, so 0 or 1.
    pub(crate) panics: u64,
}

/// Runs every target for `per_target`, one after another, and returns
/// their figures. A target that panics is reported in its figure and the
/// next one runs; the caller decides to fail on panics.
///
/// # Errors
/// The toolchain or cargo-fuzz cannot be installed, the targets do not
/// build, or a run fails without a finding (a bad corpus directory, say).
pub(crate) fn run(per_target: Duration) -> anyhow::Result<Vec<Figure>> {
    ensure_tools()?;
    let fuzz_dir = cmd::repo_root().join("fuzz");
    let targets = targets(&fuzz_dir)?;
    // One build for every target, so each run's time is fuzzing.
    cmd::run(nightly_cargo(&["fuzz", "build"]).args(BUILD_OPTIONS))?;
    let mut figures = Vec::with_capacity(targets.len());
    for target in &targets {
        let figure = run_target(&fuzz_dir, target, per_target)?;
        println!(
            "fuzz {}: {} executions in {:.0} s, {} panics",
            figure.target, figure.executions, figure.seconds, figure.panics
        );
        figures.push(figure);
    }
    Ok(figures)
}

/// The figures as JSON: each target's, and the totals.
pub(crate) fn to_json(figures: &[Figure]) -> serde_json::Value {
    let targets: Vec<serde_json::Value> = figures
        .iter()
        .map(|f| {
            json!({
                "target": f.target,
                "seconds": f.seconds,
                "executions": f.executions,
                "panics": f.panics,
            })
        })
        .collect();
    json!({
        "targets": targets,
        "executions": figures.iter().map(|f| f.executions).sum::<u64>(),
        "panics": figures.iter().map(|f| f.panics).sum::<u64>(),
    })
}

/// Installs the nightly toolchain and cargo-fuzz, when missing.
fn ensure_tools() -> anyhow::Result<()> {
    if cmd::output("rustup", &["run", TOOLCHAIN, "rustc", "--version"]).is_none() {
        cmd::run(Command::new("rustup").args([
            "toolchain",
            "install",
            TOOLCHAIN,
            "--profile",
            "minimal",
        ]))?;
    }
    if cmd::output("cargo", &["fuzz", "--version"]).is_none() {
        cmd::run(cmd::cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    }
    Ok(())
}

/// `cargo +nightly <args>` at the repository root. Through `rustup run`,
/// since the `cargo` on xtask's PATH may be a toolchain's own rather than
/// rustup's proxy, which alone understands `+nightly`.
fn nightly_cargo(args: &[&str]) -> Command {
    let mut command = Command::new("rustup");
    command
        .args(["run", TOOLCHAIN, "cargo"])
        .args(args)
        .current_dir(cmd::repo_root());
    // What the cargo running xtask set for it: the toolchain would pin
    // stable, and build scripts that watch these (ring's watches
    // CARGO_MANIFEST_DIR) would rebuild after a run of cargo fuzz by hand.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if RUN_ENV.contains(&name.as_ref()) || name.starts_with("CARGO_PKG_") {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// The variables cargo sets for a program it runs (besides `CARGO_PKG_*`),
/// and rustup's toolchain choice.
const RUN_ENV: &[&str] = &[
    "CARGO",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "RUSTUP_TOOLCHAIN",
];

/// The targets: the binaries in `fuzz/fuzz_targets/`, by name.
fn targets(fuzz_dir: &Path) -> anyhow::Result<Vec<String>> {
    let dir = fuzz_dir.join("fuzz_targets");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs")
            && let Some(stem) = path.file_stem()
        {
            names.push(stem.to_string_lossy().into_owned());
        }
    }
    names.sort();
    if names.is_empty() {
        bail!("no fuzz targets in {}", dir.display());
    }
    Ok(names)
}

fn run_target(fuzz_dir: &Path, target: &str, per_target: Duration) -> anyhow::Result<Figure> {
    let work = cmd::target_dir().join("fuzz");
    let scratch = work.join("corpus").join(target);
    let logs = work.join("logs");
    for dir in [&scratch, &logs] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let artifacts = fuzz_dir.join("artifacts").join(target);
    let before = findings(&artifacts);
    let log_path = logs.join(format!("{target}.log"));
    let log =
        File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut command = nightly_cargo(&["fuzz", "run"]);
    command
        .args(BUILD_OPTIONS)
        .arg(target)
        .arg(&scratch)
        .arg(fuzz_dir.join("corpus").join(target))
        .arg("--")
        .arg(format!("-max_total_time={}", per_target.as_secs().max(1)))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
        .arg("-print_final_stats=1")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: stopping it stops cargo's child too.
        .process_group(0);
    println!(
        "\n$ cargo +{TOOLCHAIN} fuzz run {} {target} {} fuzz/corpus/{target} -- -max_total_time={}  (output: {})",
        BUILD_OPTIONS.join(" "),
        scratch.display(),
        per_target.as_secs().max(1),
        log_path.display()
    );
    let started = Instant::now();
    let status = wait_or_stop(command, per_target + BUILD_ALLOWANCE)
        .with_context(|| format!("running fuzz target {target}"))?;
    let elapsed = started.elapsed();
    let output = String::from_utf8_lossy(&std::fs::read(&log_path)?).into_owned();
    let new: Vec<PathBuf> = findings(&artifacts).difference(&before).cloned().collect();
    for artifact in &new {
        println!(
            "fuzz {target}: finding in {}; replay with `cargo +{TOOLCHAIN} fuzz run {} {target} {}`",
            artifact.display(),
            BUILD_OPTIONS.join(" "),
            artifact.display()
        );
    }
    let finding = match status {
        None => {
            println!(
                "fuzz {target}: stopped after {} s; see {}",
                elapsed.as_secs(),
                log_path.display()
            );
            true
        }
        Some(status) if status.success() => !new.is_empty(),
        Some(status) if reports_finding(&output) || !new.is_empty() => {
            println!("fuzz {target}: {status}; see {}", log_path.display());
            true
        }
        Some(status) => bail!(
            "`cargo +{TOOLCHAIN} fuzz run {target}` failed ({status}) without a finding; see {}",
            log_path.display()
        ),
    };
    Ok(Figure {
        target: target.to_owned(),
        seconds: fuzzing_seconds(&output).unwrap_or(elapsed.as_secs_f64()),
        executions: executions(&output).unwrap_or(0),
        panics: u64::from(finding),
    })
}

/// Runs `command` to its end, or stops its process group at `limit`
/// (`None`).
fn wait_or_stop(mut command: Command, limit: Duration) -> anyhow::Result<Option<ExitStatus>> {
    let mut child = command.spawn().context("could not start cargo fuzz")?;
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    let _ = child.kill();
    child.wait()?;
    Ok(None)
}

/// The finding artifacts in `dir` (none when it does not exist).
fn findings(dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| FINDINGS.iter().any(|f| n.starts_with(f)))
        })
        .collect()
}

/// Whether libFuzzer's output reports a crash, a Rust panic, a hang or
/// running out of memory.
fn reports_finding(output: &str) -> bool {
    [
        "panicked at",
        "==ERROR: libFuzzer",
        "ERROR: AddressSanitizer",
        "SUMMARY: libFuzzer",
    ]
    .iter()
    .any(|marker| output.contains(marker))
}

/// `stat::number_of_executed_units: N` of `-print_final_stats=1`.
fn executions(output: &str) -> Option<u64> {
    output
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("stat::number_of_executed_units:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The seconds of libFuzzer's closing `Done N runs in S second(s)`.
fn fuzzing_seconds(output: &str) -> Option<f64> {
    output.lines().rev().find_map(|line| {
        let rest = line.trim().strip_prefix("Done ")?;
        let (_, seconds) = rest.split_once(" runs in ")?;
        seconds.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "INFO: Running with entropic power schedule (0xFF, 100).
#2\tINITED cov: 312 ft: 313 corp: 1/1b exec/s: 0 rss: 30Mb
#524288\tpulse  cov: 1733 ft: 5210 corp: 402/9815b lim: 4096 exec/s: 8738 rss: 74Mb
Done 612210 runs in 61 second(s)
stat::number_of_executed_units: 612210
stat::average_exec_per_sec:     10036
stat::new_units_added:          1013
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              81
";

    const PANIC: &str = "thread '<unnamed>' panicked at providers/x/src/lib.rs:10:5:
attempt to subtract with overflow
==4242== ERROR: libFuzzer: deadly signal
stat::number_of_executed_units: 1234
SUMMARY: libFuzzer: deadly signal
MS: 1 ChangeBit-; base unit: 0000
artifact_prefix='/work/fuzz/artifacts/x/'; Test unit written to /work/fuzz/artifacts/x/crash-da39a3ee
";

    #[test]
    fn a_clean_run_reports_its_executions_and_time_and_no_finding() {
        assert_eq!(executions(CLEAN), Some(612_210));
        assert_eq!(fuzzing_seconds(CLEAN), Some(61.0));
        assert!(!reports_finding(CLEAN));
    }

    #[test]
    fn a_panic_is_a_finding_and_keeps_the_executions_before_it() {
        assert!(reports_finding(PANIC));
        assert_eq!(executions(PANIC), Some(1234));
        assert_eq!(fuzzing_seconds(PANIC), None);
    }

    #[test]
    fn only_finding_artifacts_count() {
        let dir = tempfile::tempdir().expect("temporary directory");
        for name in ["crash-1", "timeout-2", "slow-unit-3", "oom-4"] {
            std::fs::write(dir.path().join(name), b"x").expect("artifact");
        }
        let names: Vec<String> = findings(dir.path())
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect();
        assert_eq!(names, ["crash-1", "oom-4", "timeout-2"]);
        assert!(findings(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn json_has_each_target_and_the_totals() {
        let figures = [
            Figure {
                target: "a".into(),
                seconds: 60.0,
                executions: 10,
                panics: 0,
            },
            Figure {
                target: "b".into(),
                seconds: 2.5,
                executions: 5,
                panics: 1,
            },
        ];
        let value = to_json(&figures);
        assert_eq!(value["executions"], 15);
        assert_eq!(value["panics"], 1);
        assert_eq!(value["targets"][1]["target"], "b");
        assert_eq!(value["targets"][1]["seconds"], 2.5);
    }

    #[test]
    fn the_committed_targets_are_found() {
        let names = targets(&cmd::repo_root().join("fuzz")).expect("targets");
        assert!(names.contains(&"go_duration".to_owned()), "{names:?}");
    }
}
