//! Writing a run's report: the JSON, the plot and the Markdown in
//! `target/bench`, rewritten after every scenario so that a failure late
//! in a run keeps what was measured before it, and copied to
//! docs/benchmarks/ once the run is over and published.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use super::machine::Machine;
use super::scenarios::Scenario;
use super::{plot, report};
use crate::cmd::{self, repo_root};

/// The note an interim report carries, so it is never mistaken for a
/// finished run's.
const INTERIM: &str = "An interim report: the run rewrites it after each scenario, and replaces it with the finished report at its end. If the run is over, it failed or was stopped after the last scenario above: the scenarios after that one and the call-count pages are missing.";

/// Where a run's report goes, and what every version of it states.
pub(super) struct Output<'a> {
    pub(super) dir: &'a Path,
    pub(super) mode: &'static str,
    pub(super) machine: &'a Machine,
    /// UTC, RFC 3339.
    pub(super) started: String,
    pub(super) clock: Instant,
}

impl Output<'_> {
    /// Writes the report of what has run so far, marked as interim. A
    /// failure to write is printed: it must not end the run.
    pub(super) fn checkpoint(&self, notes: &[String], results: &[Scenario]) {
        let mut notes = notes.to_vec();
        notes.push(INTERIM.to_owned());
        if let Err(e) = self.write(&notes, results) {
            println!("[bench] the interim report could not be written: {e:#}");
        }
    }

    /// Writes the finished run's report; answers the files written.
    pub(super) fn finish(
        &self,
        notes: &[String],
        results: &[Scenario],
    ) -> anyhow::Result<Vec<PathBuf>> {
        self.write(notes, results)
    }

    fn write(&self, notes: &[String], results: &[Scenario]) -> anyhow::Result<Vec<PathBuf>> {
        let others = self.machine.others();
        let run = report::Run {
            mode: self.mode,
            started: self.started.clone(),
            took_seconds: self.clock.elapsed().as_secs_f64(),
            commit: commit(),
            machine: self.machine,
            others: &others,
            notes,
        };
        write(self.dir, &run, results)
    }
}

/// Copies `files` to docs/benchmarks/.
pub(super) fn publish(files: &[PathBuf]) -> anyhow::Result<()> {
    let docs = repo_root().join("docs/benchmarks");
    std::fs::create_dir_all(&docs)?;
    for file in files {
        let name = file.file_name().context("a report file without a name")?;
        std::fs::copy(file, docs.join(name))
            .with_context(|| format!("copying {} to {}", file.display(), docs.display()))?;
    }
    println!("published to {}", docs.display());
    Ok(())
}

/// Writes the JSON, the plot and the Markdown into `out`; returns their paths.
fn write(out: &Path, run: &report::Run<'_>, results: &[Scenario]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out)?;
    let mut written = Vec::new();
    let json = out.join("report.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&report::json(run, results))?,
    )?;
    written.push(json);
    let series: Vec<_> = results.iter().filter_map(|s| s.series.as_ref()).collect();
    let plot_path = out.join(report::PLOT);
    let plotted = match plot::svg(&series)? {
        Some(svg) => {
            std::fs::write(&plot_path, svg)?;
            written.push(plot_path);
            true
        }
        None => {
            // An earlier interim report's plot must not stand beside a
            // report without one.
            if plot_path.exists() {
                std::fs::remove_file(&plot_path)?;
            }
            false
        }
    };
    let markdown = out.join("report.md");
    std::fs::write(&markdown, report::markdown(run, results, plotted))?;
    written.push(markdown);
    Ok(written)
}

/// The commit measured, and whether the working tree differs from it.
pub(super) fn commit() -> String {
    commit_of(&repo_root())
}

/// The pages a run publishes itself: a full run writes its call-count
/// pages there before its report, so they must not mark the report's
/// commit as changed.
const PUBLISHED: &str = ":(exclude)docs/benchmarks";

fn commit_of(root: &Path) -> String {
    let root = root.to_string_lossy();
    let head = cmd::output("git", &["-C", &root, "rev-parse", "--short", "HEAD"])
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned());
    // --no-optional-locks: reading must not refresh the index.
    let dirty = cmd::output(
        "git",
        &[
            "--no-optional-locks",
            "-C",
            &root,
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            PUBLISHED,
        ],
    )
    .is_some_and(|s| !s.trim().is_empty());
    if dirty {
        format!("{head} with uncommitted changes")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interim_report_says_so_until_the_finished_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let machine = Machine::observe();
        let output = Output {
            dir: dir.path(),
            mode: "full",
            machine: &machine,
            started: "2026-11-30T10:00:00Z".to_owned(),
            clock: Instant::now(),
        };
        // A plot left by an earlier run has no place beside a report
        // without scenarios.
        std::fs::write(dir.path().join(report::PLOT), "<svg/>").unwrap();
        let notes = vec!["The admission webhook's figures.".to_owned()];
        output.checkpoint(&notes, &[]);
        let interim = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(interim.contains(INTERIM), "{interim}");
        assert!(interim.contains(&notes[0]), "{interim}");
        assert!(!dir.path().join(report::PLOT).exists());
        let json = std::fs::read_to_string(dir.path().join("report.json")).unwrap();
        assert!(json.contains("An interim report"), "{json}");

        let written = output.finish(&notes, &[]).unwrap();
        let finished = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(!finished.contains(INTERIM), "{finished}");
        assert!(finished.contains(&notes[0]), "{finished}");
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["report.json", "report.md"]);
    }

    #[test]
    fn the_pages_a_run_publishes_do_not_mark_its_commit_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git")
                .args([
                    "-c",
                    "user.name=bench",
                    "-c",
                    "user.email=bench@example.invalid",
                ])
                .arg("-C")
                .arg(root)
                .args(args)
                .output()
                .unwrap();
            assert!(status.status.success(), "git {args:?}: {status:?}");
        };
        git(&["init", "-q"]);
        std::fs::create_dir_all(root.join("docs/benchmarks")).unwrap();
        std::fs::write(root.join("docs/benchmarks/rancher.md"), "old").unwrap();
        std::fs::write(root.join("Cargo.toml"), "old").unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "start"]);
        let head = commit_of(root);
        assert!(!head.contains(' ') && head.len() >= 7, "{head}");

        std::fs::write(root.join("docs/benchmarks/rancher.md"), "new").unwrap();
        assert_eq!(commit_of(root), head);
        std::fs::write(root.join("Cargo.toml"), "new").unwrap();
        assert_eq!(commit_of(root), format!("{head} with uncommitted changes"));
    }
}
