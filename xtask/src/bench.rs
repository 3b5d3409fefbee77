//! `cargo xtask bench`: the real CCM binary against the real test API
//! server at scale, its cloud calls set against those of upstream's
//! algorithm for the same work.
//!
//! A benchmark prints figures; it is not a timed test: targets missed are
//! reported, not failed on. Every process it starts is stopped when it
//! ends, on error too.

mod driver;
mod harness;
mod machine;
mod measurements;
mod plot;
mod report;
mod scenarios;
mod upstream;

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::{Context, bail};

use crate::cmd::{self, cargo, repo_root, run};
use harness::{Binaries, KubeApiQps};
use machine::Machine;
use scenarios::{Scale, Scenario, Status, burst, established, routes};

const USAGE: &str =
    "usage: cargo xtask bench [--quick] [--publish] [--only bursts|cluster] [--no-build]

Builds fake-cloud-controller-manager and test-apiserver in release mode and
runs them as processes, the fake cloud answering like a real one (50 ms a
call, 20 calls/s, batches of 200), through these scenarios:

  1. bursts of new nodes (at upstream's default --kube-api-qps and raised)
  6. a route burst          5. LoadBalancer Services created at once
  2. a steady state         3. a heartbeat storm        4. node churn

Each reports its figures and its cloud calls next to those upstream's Go
controllers would make for the same work. Writes target/bench/report.md,
report.json and node-initialization.svg (process logs in target/bench/runs/).
The full run takes 30 minutes or more.

  --quick      smaller scenarios, about 3 minutes; cannot be published
  --publish    also copy the report to docs/benchmarks/ (full runs only)
  --only X     only the node bursts (bursts), the route burst (routes), or
               the scenarios on an established cluster, 5, 2, 3, 4 (cluster)
  --no-build   use the release binaries already in target/release";

#[derive(Debug)]
struct Options {
    scale: Scale,
    publish: bool,
    bursts: bool,
    routes: bool,
    cluster: bool,
    build: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        scale: Scale::FULL,
        publish: false,
        bursts: true,
        routes: true,
        cluster: true,
        build: true,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--quick" => options.scale = Scale::QUICK,
            "--publish" => options.publish = true,
            "--no-build" => options.build = false,
            "--only" => {
                let only = args.next().map(String::as_str);
                if !matches!(only, Some("bursts" | "routes" | "cluster")) {
                    bail!("--only takes bursts, routes or cluster, not {only:?}\n\n{USAGE}");
                }
                options.bursts = only == Some("bursts");
                options.routes = only == Some("routes");
                options.cluster = only == Some("cluster");
            }
            other => bail!("unknown option `{other}`\n\n{USAGE}"),
        }
    }
    let everything = options.bursts && options.routes && options.cluster;
    if options.publish && (!options.scale.is_full() || !everything) {
        bail!("--publish needs the full run: the published figures are the full benchmark's");
    }
    Ok(Some(options))
}

pub(crate) fn main(args: &[String]) -> anyhow::Result<()> {
    let Some(options) = parse(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    if options.build {
        run(cargo().args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "test-apiserver",
            "-p",
            "fake-cloud-controller-manager",
        ]))?;
    }
    let target = cmd::target_dir();
    let binaries = Binaries {
        api_server: target.join("release/test-apiserver"),
        ccm: target.join("release/fake-cloud-controller-manager"),
    };
    let out = target.join("bench");
    let runs = out.join("runs");
    if runs.exists() {
        std::fs::remove_dir_all(&runs).with_context(|| format!("clearing {}", runs.display()))?;
    }

    let machine = Machine::observe();
    let started = driver::rfc3339(SystemTime::now());
    let clock = Instant::now();
    let mut notes = Vec::new();
    if !options.scale.is_full() {
        notes.push("A quick run: the targets are set for the full size (5,000 nodes, 1,000 Services), so only the heartbeat storm's, which holds at any size, is evaluated.".to_owned());
    }
    let mut results = Vec::new();
    if options.bursts {
        for (qps, sizes) in [
            (KubeApiQps::Default, options.scale.default_qps_bursts),
            (KubeApiQps::RAISED, options.scale.raised_qps_bursts),
        ] {
            for &nodes in sizes {
                let scenario = burst::run(
                    &binaries,
                    &runs.join(format!("burst-{nodes}-{}", qps.id())),
                    nodes,
                    qps,
                );
                progress(&scenario);
                results.push(scenario);
            }
        }
    }
    let groups = [
        (options.routes, Group::Routes),
        (options.cluster, Group::Established),
    ];
    for (wanted, group) in groups {
        if !wanted {
            continue;
        }
        let default = group.run(
            &binaries,
            &runs,
            &options.scale,
            KubeApiQps::Default,
            &mut notes,
        );
        let failed = default.iter().any(|s| s.status != Status::Complete);
        results.extend(default);
        if failed {
            notes.push(format!("At upstream's default --kube-api-qps the CCM did not complete {}, so it ran again with the QPS raised, to show the CCM's own figures.", group.describe()));
            results.extend(group.run(
                &binaries,
                &runs,
                &options.scale,
                KubeApiQps::RAISED,
                &mut notes,
            ));
        }
    }

    let others = machine.others();
    let report = report::Run {
        mode: options.scale.name,
        started,
        took_seconds: clock.elapsed().as_secs_f64(),
        commit: commit(),
        machine: &machine,
        others: &others,
        notes: &notes,
    };
    let written = write(&out, &report, &results)?;
    println!("\nreport: {}", out.join("report.md").display());
    for scenario in &results {
        for t in &scenario.targets {
            let verdict = if t.met { "met" } else { "NOT MET" };
            println!("  {verdict:>7}  {}: {} ({})", t.name, t.measured, t.limit);
        }
    }
    if options.publish {
        let docs = repo_root().join("docs/benchmarks");
        std::fs::create_dir_all(&docs)?;
        for file in &written {
            let name = file.file_name().context("a report file without a name")?;
            std::fs::copy(file, docs.join(name))
                .with_context(|| format!("copying {} to {}", file.display(), docs.display()))?;
        }
        println!("published to {}", docs.display());
    }
    Ok(())
}

/// The scenarios that run on a cluster of their own.
#[derive(Debug, Clone, Copy)]
enum Group {
    /// Scenario 6.
    Routes,
    /// Scenarios 5, 2, 3 and 4.
    Established,
}

impl Group {
    fn describe(self) -> &'static str {
        match self {
            Self::Routes => "the route burst",
            Self::Established => "every scenario on the established cluster",
        }
    }

    /// Runs the group; a failure to prepare its cluster becomes a note.
    fn run(
        self,
        binaries: &Binaries,
        runs: &Path,
        scale: &Scale,
        qps: KubeApiQps,
        notes: &mut Vec<String>,
    ) -> Vec<Scenario> {
        let scenarios = match self {
            Self::Routes => {
                let dir = runs.join(format!("routes-{}", qps.id()));
                Ok(vec![routes::run(binaries, &dir, scale, qps)])
            }
            Self::Established => {
                let dir = runs.join(format!("cluster-{}", qps.id()));
                established::run(binaries, &dir, scale, qps)
            }
        };
        match scenarios {
            Ok(scenarios) => {
                scenarios.iter().for_each(progress);
                scenarios
            }
            Err(err) => {
                let note = format!(
                    "The cluster for {} ({}) could not be prepared: {err:#}",
                    self.describe(),
                    qps.describe()
                );
                println!("{note}");
                notes.push(note);
                Vec::new()
            }
        }
    }
}

fn progress(scenario: &Scenario) {
    let status = match &scenario.status {
        Status::Complete => "done".to_owned(),
        Status::Incomplete(why) => format!("stopped early: {why}"),
        Status::NotRun(why) => format!("not run: {why}"),
    };
    println!(
        "[bench] {} ({}): {status}",
        scenario.title, scenario.ccm_flags
    );
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
    let plotted = match plot::svg(&series)? {
        Some(svg) => {
            let path = out.join(report::PLOT);
            std::fs::write(&path, svg)?;
            written.push(path);
            true
        }
        None => false,
    };
    let markdown = out.join("report.md");
    std::fs::write(&markdown, report::markdown(run, results, plotted))?;
    written.push(markdown);
    Ok(written)
}

/// The commit measured, and whether the working tree differs from it.
fn commit() -> String {
    let root = repo_root();
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

    fn args(list: &[&str]) -> anyhow::Result<Option<Options>> {
        parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn quick_runs_and_partial_runs_cannot_be_published() {
        assert!(args(&["--quick", "--publish"]).is_err());
        assert!(args(&["--only", "bursts", "--publish"]).is_err());
        let full = args(&["--publish"]).unwrap().unwrap();
        assert!(full.publish && full.bursts && full.routes && full.cluster);
    }

    #[test]
    fn only_selects_one_group() {
        let bursts = args(&["--only", "bursts"]).unwrap().unwrap();
        assert!(bursts.bursts && !bursts.routes && !bursts.cluster);
        let routes = args(&["--only", "routes"]).unwrap().unwrap();
        assert!(!routes.bursts && routes.routes && !routes.cluster);
        assert!(args(&["--only", "steady"]).is_err());
        assert!(args(&["--help"]).unwrap().is_none());
    }
}
