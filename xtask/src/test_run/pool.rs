//! Test executables run side by side, a few at a time, longest first.
//!
//! `cargo test --workspace` runs its ~120 test executables one after the
//! other; each uses the machine's two cores only while its own tests run,
//! and most of its wall time is spent waiting (on a child process, a
//! timer, a watch). Run three at a time, the same tests take well under
//! half the time (see `ci::TEST_JOBS`). Each executable's output goes to a
//! log file; a failure prints it whole.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// One test executable (or any command printing libtest's summaries) and
/// the name its log and its line in the summary carry.
pub(crate) struct Job {
    pub(crate) name: String,
    pub(crate) command: Command,
}

/// How one job ended.
#[derive(Debug)]
struct Outcome {
    name: String,
    secs: f64,
    passed: u64,
    /// `None` when it passed; else why not.
    failure: Option<String>,
    log: PathBuf,
}

/// Runs `jobs`, at most `width` at once, each killed after `limit`; the
/// longest (as the previous run in `log_dir` measured them, else as
/// [`FIRST_RUN_ESTIMATES`] has them) start first.
/// Answers how many tests passed; fails naming every job that failed,
/// after all have ended.
pub(crate) fn run(
    jobs: Vec<Job>,
    width: usize,
    limit: Duration,
    log_dir: &Path,
) -> anyhow::Result<u64> {
    std::fs::create_dir_all(log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let times_file = log_dir.join("durations.json");
    let queue = Arc::new(Mutex::new(longest_first(
        jobs,
        &known_durations(&times_file),
    )));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let workers: Vec<_> = (0..width.max(1))
        .map(|_| {
            let queue = Arc::clone(&queue);
            let outcomes = Arc::clone(&outcomes);
            let log_dir = log_dir.to_owned();
            std::thread::spawn(move || {
                loop {
                    let next = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                    let Some(job) = next else { break };
                    let outcome = run_one(job, limit, &log_dir);
                    report(&outcome);
                    if let Ok(mut all) = outcomes.lock() {
                        all.push(outcome);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        if worker.join().is_err() {
            bail!("a test runner thread panicked");
        }
    }
    let outcomes = std::mem::take(
        &mut *outcomes
            .lock()
            .map_err(|_| anyhow::anyhow!("test outcomes poisoned"))?,
    );
    let durations: BTreeMap<&str, f64> =
        outcomes.iter().map(|o| (o.name.as_str(), o.secs)).collect();
    if let Ok(text) = serde_json::to_string_pretty(&durations) {
        let _ = std::fs::write(&times_file, text);
    }
    let passed = outcomes.iter().map(|o| o.passed).sum();
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.failure
                .as_ref()
                .map(|why| format!("{} ({why}; log {})", o.name, o.log.display()))
        })
        .collect();
    println!(
        "\nxtask: {} test executables, {passed} tests passed, in {:.0} s ({} at a time)",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        width.max(1)
    );
    if !failed.is_empty() {
        bail!(
            "{} of {} test executables failed:\n  {}",
            failed.len(),
            outcomes.len(),
            failed.join("\n  ")
        );
    }
    Ok(passed)
}

/// What a machine's first run orders `cargo xtask ci`'s test executables
/// by, before it has timed them itself: the longest, as a warm run at
/// d4e8a85 measured them (seconds). Without them the first run started
/// them in listing order, and the longest (the AWS binary's, 166 s) last:
/// 255 s for the step, against 161 s once ordered. Only an order, never a
/// limit: a name gone or renamed here is merely started first, as any job
/// not timed yet is.
const FIRST_RUN_ESTIMATES: &[(&str, f64)] = &[
    ("cmd/aws-cloud-controller-manager integration", 144.0),
    (
        "cmd/digitalocean-cloud-controller-manager integration",
        88.8,
    ),
    ("crates/controllers integration", 58.7),
    ("providers/aws integration", 58.7),
    ("cmd/fake-cloud-controller-manager integration", 47.2),
    ("cmd/rancher-cloud-controller-manager e2e", 16.7),
    ("testing/test-apiserver contract", 12.3),
    ("crates/app ccm_app (lib)", 11.8),
    ("crates/leader-election election", 9.2),
    ("providers/digitalocean integration", 7.3),
    ("providers/rancher integration", 6.7),
    ("doc tests", 4.5),
    ("crates/runtime integration", 3.5),
];

/// The jobs in the order they start: those the previous run did not time
/// first (they may be long), then the longest.
fn longest_first(mut jobs: Vec<Job>, previous: &BTreeMap<String, f64>) -> VecDeque<Job> {
    let key = |job: &Job| previous.get(&job.name).copied().unwrap_or(f64::INFINITY);
    jobs.sort_by(|a, b| key(b).total_cmp(&key(a)));
    jobs.into()
}

/// The durations the previous run wrote to `times_file`, over
/// [`FIRST_RUN_ESTIMATES`].
fn known_durations(times_file: &Path) -> BTreeMap<String, f64> {
    let mut known: BTreeMap<String, f64> = FIRST_RUN_ESTIMATES
        .iter()
        .map(|(name, secs)| ((*name).to_owned(), *secs))
        .collect();
    known.extend(read_durations(times_file));
    known
}

fn read_durations(path: &Path) -> BTreeMap<String, f64> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// The file name a job's log takes: its name with `/` and spaces replaced.
fn log_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.log")
}

fn run_one(mut job: Job, limit: Duration, log_dir: &Path) -> Outcome {
    let log = log_dir.join(log_name(&job.name));
    let started = Instant::now();
    let ended = spawn_logged(&mut job.command, &log).and_then(|child| wait_within(child, limit));
    let secs = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let passed = text.lines().map(super::passed_in).sum();
    let failure = match ended {
        Ok(Some(status)) if status.success() => None,
        Ok(Some(status)) => Some(format!("exited {status}")),
        Ok(None) => Some(format!("killed after {} s", limit.as_secs())),
        Err(err) => Some(format!("{err:#}")),
    };
    Outcome {
        name: job.name,
        secs,
        passed,
        failure,
        log,
    }
}

fn spawn_logged(command: &mut Command, log: &Path) -> anyhow::Result<Child> {
    let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("could not start {:?}", command.get_program()))
}

/// The child's exit status, or `None` when it ran past `limit` (then it
/// is killed).
fn wait_within(mut child: Child, limit: Duration) -> anyhow::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One line per finished job; a failed job's whole log after it.
fn report(outcome: &Outcome) {
    match &outcome.failure {
        None => println!(
            "  ok     {:>6.1} s  {:>4} passed  {}",
            outcome.secs, outcome.passed, outcome.name
        ),
        Some(why) => {
            let text = std::fs::read_to_string(&outcome.log).unwrap_or_default();
            println!(
                "  FAILED {:>6.1} s  {}: {why}\n----- {} -----\n{text}\n----- end of {} -----",
                outcome.secs,
                outcome.name,
                outcome.log.display(),
                outcome.name
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(name: &str, script: &str) -> Job {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        Job {
            name: name.to_owned(),
            command,
        }
    }

    #[test]
    fn every_job_runs_and_passes_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = (0..5)
            .map(|i| {
                shell(
                    &format!("job {i}"),
                    &format!("echo 'test result: ok. {i} passed; 0 failed'"),
                )
            })
            .collect();
        let passed = run(jobs, 2, Duration::from_secs(30), dir.path()).unwrap();
        assert_eq!(passed, 10);
        let durations = read_durations(&dir.path().join("durations.json"));
        assert_eq!(durations.len(), 5);
    }

    #[test]
    fn a_failure_is_reported_after_the_others_ran() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let jobs = vec![
            shell("bad", "echo boom; exit 3"),
            shell("good", &format!("touch {}", marker.display())),
        ];
        let err = run(jobs, 1, Duration::from_secs(30), dir.path()).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("1 of 2 test executables failed"), "{text}");
        assert!(text.contains("bad (exited"), "{text}");
        assert!(marker.exists(), "the job after the failure still ran");
    }

    #[test]
    fn a_job_past_its_limit_is_killed_and_fails() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let err = run(
            vec![shell("slow", "sleep 30")],
            1,
            Duration::from_millis(300),
            dir.path(),
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(format!("{err:#}").contains("killed after"), "{err:#}");
    }

    #[test]
    fn the_longest_known_jobs_start_first_and_unknown_ones_before_them() {
        let previous: BTreeMap<String, f64> =
            [("short".to_owned(), 1.0), ("long".to_owned(), 50.0)].into();
        let jobs = ["short", "new", "long"]
            .map(|name| shell(name, "true"))
            .into_iter()
            .collect();
        let order: Vec<String> = longest_first(jobs, &previous)
            .into_iter()
            .map(|j| j.name)
            .collect();
        assert_eq!(order, ["new", "long", "short"]);
    }

    #[test]
    fn a_first_run_orders_by_the_estimates_and_a_timed_run_by_its_times() {
        let dir = tempfile::tempdir().unwrap();
        let times = dir.path().join("durations.json");
        let names = [
            "crates/runtime integration",
            "new",
            "cmd/aws-cloud-controller-manager integration",
        ];
        let order = |times: &Path| -> Vec<String> {
            let jobs = names.map(|name| shell(name, "true")).into_iter().collect();
            longest_first(jobs, &known_durations(times))
                .into_iter()
                .map(|j| j.name)
                .collect()
        };
        assert_eq!(order(&times), [names[1], names[2], names[0]]);
        std::fs::write(
            &times,
            r#"{"crates/runtime integration": 500.0, "new": 1.0}"#,
        )
        .unwrap();
        assert_eq!(order(&times), [names[0], names[2], names[1]]);
    }

    #[test]
    fn log_names_are_plain_file_names() {
        assert_eq!(
            log_name("cmd/aws ccm/tests call_budgets"),
            "cmd_aws_ccm_tests_call_budgets.log"
        );
    }
}
