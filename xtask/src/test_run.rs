//! The workspace's test executables, listed from cargo's test build and run
//! as cargo runs them: one at a time with their output shown
//! ([`run_counting`]), or side by side ([`pool`]).

pub(crate) mod pool;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cmd::cargo;

/// One test executable of the workspace's test build.
#[derive(Debug)]
pub(crate) struct TestBinary {
    /// The package's directory relative to the root (`testing/test-apiserver`).
    pub(crate) package: String,
    /// The target's name (`e2e` for `tests/e2e.rs`).
    pub(crate) target: String,
    /// The target's kind (`test` for an integration test, `lib`, `bin`).
    pub(crate) kind: String,
    executable: PathBuf,
    package_dir: PathBuf,
}

impl TestBinary {
    /// Builds the workspace's tests (nothing, when `cargo test --workspace`
    /// ran before) and lists their executables.
    pub(crate) fn all() -> anyhow::Result<Vec<Self>> {
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
    /// directory as cargo runs it, with the kubectl xtask chose.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.executable);
        cmd.args(args)
            .current_dir(&self.package_dir)
            .env("CARGO_MANIFEST_DIR", &self.package_dir);
        crate::tools::kubectl::point_at(&mut cmd);
        cmd
    }

    /// What it is called in a summary: its package and target, and the
    /// target's kind unless an integration test (`crates/app lib`).
    pub(crate) fn name(&self) -> String {
        match self.kind.as_str() {
            "test" => format!("{} {}", self.package, self.target),
            kind => format!("{} {} ({kind})", self.package, self.target),
        }
    }

    /// Its tests (only the ignored ones, the real-cluster variants, when
    /// `ignored`) grouped by their top-level module, in the order `--list`
    /// gives them: an executable that holds several suites runs them one
    /// module at a time, as one executable per suite did.
    pub(crate) fn tests_by_module(
        &self,
        ignored: bool,
    ) -> anyhow::Result<Vec<(String, Vec<String>)>> {
        let args: &[&str] = if ignored {
            &["--list", "--ignored"]
        } else {
            &["--list"]
        };
        let list = crate::cmd::stdout(&mut self.command(args))?;
        Ok(by_module(&list))
    }

    /// The executable with `args` as a job for [`pool::run`].
    pub(crate) fn job(&self, args: &[&str]) -> pool::Job {
        pool::Job {
            name: self.name(),
            command: self.command(args),
        }
    }
}

/// Runs a test executable with its output shown, and answers how many tests
/// passed (libtest's `N passed`).
pub(crate) fn run_counting(cmd: &mut Command) -> anyhow::Result<u64> {
    let shown = format!("{cmd:?}");
    let mut passed = 0;
    crate::cmd::run_lines(cmd, &shown, |line| {
        println!("{line}");
        passed += passed_in(line);
    })?;
    Ok(passed)
}

/// libtest's `--list` output (`module::name: test` lines) as test names
/// grouped by top-level module, the modules in first-seen order.
fn by_module(list: &str) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for name in list.lines().filter_map(|l| l.strip_suffix(": test")) {
        let module = name.split_once("::").map_or("", |(m, _)| m);
        match groups.iter_mut().find(|(m, _)| m == module) {
            Some((_, names)) => names.push(name.to_owned()),
            None => groups.push((module.to_owned(), vec![name.to_owned()])),
        }
    }
    groups
}

/// `N` from libtest's `test result: ok. N passed; ...` line, else 0.
pub(crate) fn passed_in(line: &str) -> u64 {
    line.strip_prefix("test result: ")
        .and_then(|rest| rest.split_once(". "))
        .and_then(|(_, rest)| rest.split_once(" passed"))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{by_module, passed_in};

    #[test]
    fn listed_tests_are_grouped_by_their_top_level_module() {
        let list = "watches::a_watch_resumes: test\nauth::tokens: test\nwatches::bookmarks: test\nloose: test\n\n2 tests, 0 benchmarks\n";
        assert_eq!(
            by_module(list),
            [
                (
                    "watches".to_owned(),
                    vec![
                        "watches::a_watch_resumes".to_owned(),
                        "watches::bookmarks".to_owned()
                    ]
                ),
                ("auth".to_owned(), vec!["auth::tokens".to_owned()]),
                (String::new(), vec!["loose".to_owned()]),
            ]
        );
    }

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
