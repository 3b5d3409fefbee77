//! `cargo xtask bench`: the real CCM binary against the real test API
//! server at scale, its cloud calls set against those of upstream's
//! algorithm for the same work.
//!
//! A benchmark prints figures; it is not a timed test: targets missed are
//! reported, not failed on. Every process it starts is stopped when it
//! ends, on error too.

mod admission;
mod against_upstream;
mod call_counts;
mod driver;
mod harness;
mod heap;
mod machine;
mod measurements;
mod output;
mod plot;
mod report;
mod scenarios;
mod upstream;
mod webhook_flood;

use std::path::Path;
use std::time::Instant;

use anyhow::Context;

use crate::cmd::{self, cargo, run};
use crate::timestamp;
use harness::{Binaries, KubeApiQps};
use machine::Machine;
use output::{Output, commit};
use scenarios::{Large, Scale, Scenario, Status, burst, established, routes};

/// The CCM at scale against the test API server; figures vs upstream's algorithm.
///
/// Builds fake-cloud-controller-manager, fake-cloud and test-apiserver in
/// release mode and runs them as processes, the fake cloud answering like a
/// real one (50 ms a call, 20 calls/s, batches of 200) from its own process
/// (so the CCM's memory figures are its own), through these scenarios:
///
///   At 5,000 nodes and 1,000 Services:
///
///   1. bursts of new nodes (at upstream's default --kube-api-qps and raised)
///   6. a route burst          5. LoadBalancer Services created at once
///   2. a steady state         3. a heartbeat storm        4. node churn
///   4. kept up for 30 minutes (1 with --quick): its memory's slope
///   2. again, the CCM restarted with upstream's watch-based routes gate
///
///   At 10,000 nodes and 2,000 Services (full runs only): 1 at the raised
///   QPS, then 5, 2, 3 and 4.
///
///   Then:
///
///   7. the admission webhook at 500 reviews/s
///   8. Rancher, 9. AWS and DigitalOcean API calls per operation (budgets)
///
///   Only with `--only webhook-flood`: the webhook flooded with 4 MiB
///   reviews while the CCM leads (a missed target fails the run).
///
/// Each reports its figures and its cloud calls next to those upstream's Go
/// controllers would make for the same work. Writes target/bench/report.md,
/// report.json and node-initialization.svg (process logs in target/bench/runs/).
/// The full run takes an hour or more.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Smaller scenarios, about 3 minutes; cannot be published.
    #[arg(long)]
    quick: bool,
    /// Also copy the report to docs/benchmarks/ (full runs, or `--only
    /// admission`, which publishes admission.md alone: the published
    /// figures are never a quick run's).
    #[arg(long, conflicts_with_all = ["quick"], verbatim_doc_comment)]
    publish: bool,
    /// Only one group of scenarios.
    #[arg(long, value_enum, value_name = "X")]
    only: Option<Only>,
    /// Use the release binaries already in target/release.
    #[arg(long)]
    no_build: bool,
    /// Instead, upstream's aws-cloud-controller-manager and ours side by
    /// side on the real control plane and moto (with --quick: ours alone at
    /// 20 nodes, held to upstream's committed figures).
    #[arg(long, conflicts_with_all = ["only", "no_build"], verbatim_doc_comment)]
    against_upstream: bool,
    /// With --against-upstream: the cluster's nodes.
    #[arg(long, requires = "against_upstream", value_parser = clap::value_parser!(u16).range(1..=1000))]
    nodes: Option<u16>,
    /// With --against-upstream: the quiet window after the busy phase.
    #[arg(long, requires = "against_upstream", value_parser = clap::value_parser!(u64).range(0..=3600))]
    quiet_seconds: Option<u64>,
}

/// The pages of call counts per operation that end a full run, with the
/// report's note pointing at each.
const PAGES: [(Only, &call_counts::Page, &str); 2] = [
    (
        Only::Rancher,
        &call_counts::RANCHER,
        "Rancher API calls per operation, ours against upstream's: `rancher.md` beside this report.",
    ),
    (
        Only::Budgets,
        &call_counts::BUDGETS,
        "AWS and DigitalOcean API calls per operation, ours against upstream's: `call-budgets.md` beside this report.",
    ),
];

/// The groups of scenarios `--only` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Only {
    /// The node bursts (1).
    Bursts,
    /// The route burst (6).
    Routes,
    /// The scenarios on an established cluster (5, 2, 3, 4).
    Cluster,
    /// 1, 5, 2, 3 and 4 at 10,000 nodes and 2,000 Services (full runs).
    Large,
    /// The admission webhook at 500 reviews/s (7).
    Admission,
    /// Rancher API calls per operation against upstream's (8).
    Rancher,
    /// AWS and DigitalOcean API calls per operation against upstream's (9).
    Budgets,
    /// The admission webhook flooded with 4 MiB reviews while the CCM
    /// leads; only when asked for, never in a full run.
    WebhookFlood,
}

impl Options {
    fn scale(&self) -> Scale {
        if self.quick {
            Scale::QUICK
        } else {
            Scale::FULL
        }
    }

    /// Refuses `--only large` with `--quick` (the large cluster has no
    /// quick size), and `--publish` with a partial run other than `--only
    /// admission`, `--only rancher` or `--only budgets`: the published
    /// report is the full benchmark's.
    fn check(&self) -> anyhow::Result<()> {
        if self.quick && self.only == Some(Only::Large) {
            anyhow::bail!(
                "--only large: the large cluster runs at full size only, not with --quick"
            );
        }
        let own_page = |only| matches!(only, Only::Admission | Only::Rancher | Only::Budgets);
        if self.publish && self.only.is_some_and(|only| !own_page(only)) {
            anyhow::bail!(
                "--publish: only a full run, --only admission, --only rancher or --only budgets is published"
            );
        }
        Ok(())
    }

    /// Whether the run includes `group`. The webhook flood runs only when
    /// asked for.
    fn runs(&self, group: Only) -> bool {
        match self.only {
            None => group != Only::WebhookFlood,
            Some(only) => only == group,
        }
    }
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    if options.against_upstream {
        let (nodes, quiet) = if options.quick {
            (
                against_upstream::QUICK_NODES,
                against_upstream::QUICK_QUIET_SECONDS,
            )
        } else {
            (100, 120)
        };
        let plan = against_upstream::Plan {
            nodes: options.nodes.unwrap_or(nodes),
            quiet_seconds: options.quiet_seconds.unwrap_or(quiet),
            quick: options.quick,
            publish: options.publish,
        };
        return against_upstream::main(plan, &commit());
    }
    options.check()?;
    let out = cmd::target_dir().join("bench");
    for (only, page, _) in PAGES {
        if options.only == Some(only) {
            page.prepare()?;
            return call_counts::run(page, &out, &commit(), options.publish);
        }
    }
    for (only, page, _) in PAGES {
        if options.runs(only) {
            page.prepare()?;
        }
    }
    let scale = options.scale();
    if !options.no_build {
        run(cargo().args([
            "build",
            "--release",
            "--quiet",
            "--bins",
            "-p",
            "ccm-test-apiserver",
            "-p",
            "fake-cloud-controller-manager",
            "-p",
            "ccm-provider-fake",
        ]))?;
    }
    let target = cmd::target_dir();
    let binaries = Binaries {
        api_server: target.join("release/test-apiserver"),
        ccm: target.join("release/fake-cloud-controller-manager"),
        cloud: target.join("release/fake-cloud"),
    };
    let runs = out.join("runs");
    if runs.exists() {
        std::fs::remove_dir_all(&runs).with_context(|| format!("clearing {}", runs.display()))?;
    }

    if options.only == Some(Only::Admission) {
        return admission_only(&binaries, &out, &scale, options.publish);
    }
    if options.only == Some(Only::WebhookFlood) {
        return webhook_flood_only(&binaries, &out, &scale);
    }
    let machine = Machine::observe();
    let output = Output {
        dir: &out,
        mode: scale.name,
        machine: &machine,
        started: timestamp::now(),
        clock: Instant::now(),
    };
    let mut notes = Vec::new();
    if !scale.is_full() {
        notes.push("A quick run: the targets are set for the full size (5,000 nodes, 1,000 Services), so only the heartbeat storm's, which holds at any size, is evaluated.".to_owned());
    }
    let mut results = Vec::new();
    if options.runs(Only::Bursts) {
        for (qps, sizes) in [
            (KubeApiQps::Default, scale.default_qps_bursts),
            (KubeApiQps::RAISED, scale.raised_qps_bursts),
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
                output.checkpoint(&notes, &results);
            }
        }
    }
    let large = scale.large.filter(|_| options.runs(Only::Large));
    if let Some(large) = large {
        let qps = KubeApiQps::RAISED;
        let dir = runs.join(format!("burst-{}-{}", large.nodes, qps.id()));
        let scenario = burst::run(&binaries, &dir, large.nodes, qps);
        progress(&scenario);
        results.push(scenario);
        output.checkpoint(&notes, &results);
    }
    let groups = [
        (options.runs(Only::Routes), Group::Routes),
        (options.runs(Only::Cluster), Group::Established),
    ]
    .into_iter()
    .chain(large.map(|l| (true, Group::Large(l))));
    for (wanted, group) in groups {
        if !wanted {
            continue;
        }
        let default = group.run(&binaries, &runs, &scale, KubeApiQps::Default, &mut notes);
        let failed = default.iter().any(|s| s.status != Status::Complete);
        results.extend(default);
        if failed {
            notes.push(format!("At upstream's default --kube-api-qps the CCM did not complete {}, so it ran again with the QPS raised, to show the CCM's own figures.", group.describe()));
            results.extend(group.run(&binaries, &runs, &scale, KubeApiQps::RAISED, &mut notes));
        }
        output.checkpoint(&notes, &results);
    }

    if options.runs(Only::Admission) {
        let figures = admission::run(&binaries, &runs.join("admission"), scale.admission_seconds)?;
        notes.push(figures.markdown());
        output.checkpoint(&notes, &results);
    }
    notes.push("Upstream's real aws-cloud-controller-manager and ours side by side on the real kube-apiserver and moto: `against-upstream/` beside this report (`cargo xtask bench --against-upstream`).".to_owned());
    // A page's failure must not lose the scenarios' report: it is noted,
    // the report written, and the failure returned at the end.
    let mut failures = Vec::new();
    for (only, page, note) in PAGES {
        if !options.runs(only) {
            continue;
        }
        match call_counts::run(page, &out, &commit(), options.publish) {
            Ok(()) => notes.push(note.to_owned()),
            Err(e) => {
                let what = e.to_string();
                let what = what.lines().next().unwrap_or_default();
                notes.push(format!(
                    "`{}` failed, so `{}` was not refreshed: {what}",
                    page.command, page.file
                ));
                failures.push(e);
            }
        }
    }
    let written = output.finish(&notes, &results)?;
    println!("\nreport: {}", out.join("report.md").display());
    for scenario in &results {
        for t in &scenario.targets {
            let verdict = if t.met { "met" } else { "NOT MET" };
            println!("  {verdict:>7}  {}: {} ({})", t.name, t.measured, t.limit);
        }
    }
    if options.publish {
        output::publish(&written)?;
    }
    match failures.into_iter().next() {
        Some(e) => Err(e.context("the report is written, but a page's tests failed")),
        None => Ok(()),
    }
}

/// `--only admission`: the webhook's figures in `out/admission.md`, also
/// copied to docs/benchmarks/ with `publish`.
fn admission_only(
    binaries: &Binaries,
    out: &Path,
    scale: &Scale,
    publish: bool,
) -> anyhow::Result<()> {
    let figures = admission::run(
        binaries,
        &out.join("runs").join("admission"),
        scale.admission_seconds,
    )?;
    let machine = Machine::observe();
    let text = format!(
        "# Admission webhook benchmark\n\nMeasured by `cargo xtask bench --only admission` at {} on {} (commit {}).\n\n{}",
        timestamp::now(),
        format_args!(
            "{} ({} cores, {:.0} GiB, load {})",
            machine.cpu, machine.cores, machine.memory_gib, machine.load_at_start
        ),
        commit(),
        figures.markdown()
    );
    std::fs::create_dir_all(out)?;
    let path = out.join("admission.md");
    std::fs::write(&path, &text)?;
    println!("\n{text}\nreport: {}", path.display());
    if publish {
        output::publish(std::slice::from_ref(&path))?;
    }
    Ok(())
}

/// `--only webhook-flood`: the figures printed and in
/// `out/webhook-flood.md`; a missed target fails the run.
fn webhook_flood_only(binaries: &Binaries, out: &Path, scale: &Scale) -> anyhow::Result<()> {
    let figures = webhook_flood::run(
        binaries,
        &out.join("runs").join("webhook-flood"),
        scale.admission_seconds,
    )?;
    let text = format!(
        "# Admission webhook flood\n\nMeasured by `cargo xtask bench --only webhook-flood` at {} (commit {}).\n\n{}",
        timestamp::now(),
        commit(),
        figures.markdown()
    );
    std::fs::create_dir_all(out)?;
    let path = out.join("webhook-flood.md");
    std::fs::write(&path, &text)?;
    println!("\n{text}\nreport: {}", path.display());
    anyhow::ensure!(figures.met(), "the webhook flood missed a target (above)");
    Ok(())
}

/// The scenarios that run on a cluster of their own.
#[derive(Debug, Clone, Copy)]
enum Group {
    /// Scenario 6.
    Routes,
    /// Scenarios 5, 2, 3 and 4.
    Established,
    /// Scenarios 5, 2, 3 and 4 at the large size.
    Large(Large),
}

impl Group {
    fn describe(self) -> &'static str {
        match self {
            Self::Routes => "the route burst",
            Self::Established => "every scenario on the established cluster",
            Self::Large(_) => "every scenario on the large established cluster",
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
            Self::Large(large) => {
                let dir = runs.join(format!("cluster-{}-{}", large.nodes, qps.id()));
                established::run(binaries, &dir, &scale.at(large), qps)
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

#[cfg(test)]
mod tests {
    use super::*;

    use clap::error::ErrorKind;

    use crate::{Task, parse_task};

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        match parse_task(&[&["bench"], args].concat())? {
            Task::Bench(options) => Ok(options),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn quick_runs_and_partial_runs_cannot_be_published() {
        let err = parse(&["--quick", "--publish"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        for group in ["bursts", "routes", "cluster", "large"] {
            let partial = parse(&["--only", group, "--publish"]).unwrap();
            assert!(partial.check().is_err(), "{group}");
        }
        for own in ["admission", "rancher", "budgets"] {
            let page = parse(&["--only", own, "--publish"]).unwrap();
            page.check().unwrap();
        }
        let full = parse(&["--publish"]).unwrap();
        full.check().unwrap();
        assert!(full.publish && full.scale().is_full());
        assert!(
            [
                Only::Bursts,
                Only::Routes,
                Only::Cluster,
                Only::Large,
                Only::Admission,
                Only::Rancher
            ]
            .into_iter()
            .all(|g| full.runs(g))
        );
    }

    #[test]
    fn the_large_cluster_is_full_size_only() {
        let quick = parse(&["--quick", "--only", "large"]).unwrap();
        assert!(quick.check().is_err());
        assert!(quick.scale().large.is_none());
        let full = parse(&["--only", "large"]).unwrap();
        full.check().unwrap();
        let large = full.scale().large.unwrap();
        assert_eq!((large.nodes, large.services), (10_000, 2_000));
        assert!(full.runs(Only::Large) && !full.runs(Only::Cluster));
    }

    #[test]
    fn the_webhook_flood_runs_only_when_asked_for() {
        assert!(!parse(&[]).unwrap().runs(Only::WebhookFlood));
        let flood = parse(&["--only", "webhook-flood"]).unwrap();
        assert!(flood.runs(Only::WebhookFlood) && !flood.runs(Only::Admission));
        assert!(flood.check().is_ok());
        assert!(
            parse(&["--only", "webhook-flood", "--publish"])
                .unwrap()
                .check()
                .is_err(),
            "not a published page"
        );
    }

    #[test]
    fn only_selects_one_group() {
        let bursts = parse(&["--only", "bursts"]).unwrap();
        assert!(
            bursts.runs(Only::Bursts) && !bursts.runs(Only::Routes) && !bursts.runs(Only::Cluster)
        );
        let routes = parse(&["--only=routes"]).unwrap();
        assert!(
            !routes.runs(Only::Bursts) && routes.runs(Only::Routes) && !routes.runs(Only::Cluster)
        );
        assert_eq!(
            parse(&["--only", "steady"]).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
        assert_eq!(
            parse(&["--help"]).unwrap_err().kind(),
            ErrorKind::DisplayHelp
        );
    }
}
