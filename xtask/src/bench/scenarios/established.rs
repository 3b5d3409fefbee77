//! Scenarios 5, 2, 3 and 4, in that order, on one established cluster:
//! its load balancers created at once, then a steady window, a heartbeat
//! storm and node churn (kept up for the soak), then the steady window
//! again with the CCM restarted under upstream's watch-based routes gate.
//! Its nodes have no pod CIDRs (routes are scenario 6's subject, on a
//! cluster of its own); the route controller runs all the same and lists
//! routes every 10 s (without the gate).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::super::driver;
use super::super::harness::{Binaries, CLOUD_QPS, Ccm, Cluster, KubeApiQps};
use super::super::heap;
use super::super::measurements::{Metrics, RequestLog, Usage, calls_between};
use super::super::upstream;
use super::{
    Figure, HEARTBEAT_PERIOD, Scale, Scenario, Status, note_lease_loss, rss_limit, totals,
    write_figures,
};

/// From this many nodes on, the whole run's peak is held to
/// [`rss_limit::LARGE`] at its end.
const LARGE_PEAK_FROM: usize = 10_000;

/// How long the cluster is left alone before a window is measured, so the
/// previous scenario's tail (a node-set pass settles within 10 s) is over.
const SETTLE: Duration = Duration::from_secs(12);
/// A churn has converged once no load balancer was updated for this long.
const CHURN_QUIET: Duration = Duration::from_secs(12);
mod soak;
mod watch_routes;

/// How often the steady window samples the CCM's resident memory.
const RSS_SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The load-balancer operations.
const LOAD_BALANCER_OPERATIONS: &[&str] = &[
    "get_load_balancer",
    "ensure_load_balancer",
    "update_load_balancer",
    "ensure_load_balancer_deleted",
];

/// One round of node churn, as [`Established::churn_round`] followed it.
struct ChurnRound {
    /// Nodes added, and removed.
    k: usize,
    /// `UpdateLoadBalancer` calls, any outcome.
    updates: u64,
    /// Since the round started, when every new node was initialized.
    initialized_after: Option<Duration>,
    /// Since the round started, when it converged: every new node
    /// initialized, an update of every load balancer, and none for
    /// [`CHURN_QUIET`] after the last. `None` when it timed out.
    converged: Option<Duration>,
    /// The CCM's metrics at the end.
    last: Metrics,
}

struct Established {
    cluster: Cluster,
    ccm: Option<Ccm>,
    scale: Scale,
    /// The CCM's client QPS, for a restart.
    qps: KubeApiQps,
    /// Node indices of the cluster now.
    nodes: Vec<usize>,
}

/// Runs the scenarios in order on one cluster; after a failure (the CCM
/// exiting, above all) the rest are reported as not run.
pub(crate) fn run(
    binaries: &Binaries,
    dir: &Path,
    scale: &Scale,
    qps: KubeApiQps,
) -> anyhow::Result<Vec<Scenario>> {
    let (n, m) = (scale.nodes, scale.services);
    let id = qps.id();
    type Step = fn(&mut Established, &mut Scenario) -> anyhow::Result<()>;
    let mut plan: Vec<(Scenario, Step)> = vec![
        (
            Scenario::new(
                format!("services-{n}-{id}"),
                format!("{m} LoadBalancer Services created at once"),
                qps,
            ),
            Established::services,
        ),
        (
            Scenario::new(
                format!("steady-{n}-{id}"),
                format!("Steady state: {n} nodes, {m} LoadBalancer Services"),
                qps,
            ),
            Established::steady,
        ),
        (
            Scenario::new(
                format!("heartbeats-{n}-{id}"),
                format!("Heartbeat storm: {n} nodes' Ready condition every 10 s"),
                qps,
            ),
            Established::heartbeats,
        ),
        (
            Scenario::new(
                format!("churn-{n}-{id}"),
                format!("Node churn: 1% of {n} nodes added and 1% removed"),
                qps,
            ),
            Established::churn,
        ),
    ];
    if let Some(soak) = scale.soak {
        plan.push((
            Scenario::new(
                format!("soak-{n}-{id}"),
                format!(
                    "Churn for {:.0} minutes: 1% of {n} nodes added and 1% removed, again each time the last change converged",
                    soak.as_secs_f64() / 60.0
                ),
                qps,
            ),
            Established::soak,
        ));
    }
    plan.push((
        Scenario::new(
            format!("steady-watch-routes-{n}-{id}"),
            format!(
                "Steady state with upstream's watch-based route reconciliation gate: {n} nodes, {m} LoadBalancer Services"
            ),
            qps,
        ),
        Established::steady_watch_routes,
    ));
    let mut cluster = Established::start(binaries, dir, *scale, qps)?;
    let mut done: Vec<Scenario> = Vec::new();
    let mut pending = plan.into_iter();
    while let Some((mut scenario, step)) = pending.next() {
        if let Err(err) = step(&mut cluster, &mut scenario) {
            note_lease_loss(&mut scenario, &err);
            scenario.status = Status::Incomplete(format!("{err:#}"));
        }
        let failed = !matches!(scenario.status, Status::Complete);
        done.push(scenario);
        if failed {
            let why = format!(
                "{} did not complete",
                done.last().map_or("", |s| s.id.as_str())
            );
            done.extend(pending.by_ref().map(|(s, _)| s.not_run(why.clone())));
            break;
        }
    }
    if let Some(last) = done.last_mut().filter(|s| s.status == Status::Complete) {
        // Last of all: symbolizing the profile maps the binary's symbol
        // tables into the CCM, resident memory no figure may include.
        let ccm = cluster.ccm()?;
        let usage = Usage::read(ccm.pid)?;
        match heap::read(ccm.metrics) {
            Ok(profile) => heap::note(last, &profile, usage, "at the end of this scenario"),
            Err(err) => last.note(format!("The heap profile could not be read: {err:#}")),
        }
    }
    cluster.cluster.stop_ccm()?;
    Ok(done)
}

impl Established {
    /// The prepared cluster and the measured CCM, once its start-up work
    /// (a status refresh of every node, a route pass) is over.
    fn start(
        binaries: &Binaries,
        dir: &Path,
        scale: Scale,
        qps: KubeApiQps,
    ) -> anyhow::Result<Self> {
        let mut cluster = Cluster::prepared(dir, binaries, scale.nodes, false)?;
        let ccm = cluster.start_ccm(qps, None)?;
        let mut established = Self {
            cluster,
            ccm: Some(ccm),
            scale,
            qps,
            nodes: (1..=scale.nodes).collect(),
        };
        established.wait(SETTLE)?;
        Ok(established)
    }

    fn api(&self) -> SocketAddr {
        self.cluster.api
    }

    fn ccm(&self) -> anyhow::Result<Ccm> {
        self.ccm.context("the CCM is not running")
    }

    /// Scenario 5: LoadBalancer Services created at once.
    fn services(&mut self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let (n, m) = (self.scale.nodes, self.scale.services);
        let ccm = self.ccm()?;
        let api = self.api();
        RequestLog::reset(api)?;
        let before = Metrics::read(ccm.metrics)?;
        let model_seconds = upstream::services(m, n, Duration::ZERO)
            .seconds
            .map_or(60.0, |(s, _)| s);
        let timeout = Duration::from_secs_f64((3.0 * model_seconds + 60.0).max(300.0));
        let start = Instant::now();
        let indices: Vec<usize> = (1..=m).collect();
        let mut last = before.clone();
        let cluster = &mut self.cluster;
        let (created, provisioned) = std::thread::scope(|scope| {
            let creation = scope.spawn(|| {
                let result = driver::create_services(api, &indices);
                (result, start.elapsed())
            });
            let provisioned = driver::poll(timeout, Duration::from_millis(500), || {
                cluster.check_alive()?;
                if let Ok(metrics) = Metrics::read(ccm.metrics) {
                    last = metrics;
                }
                let (_, with_ingress) = driver::services_with_ingress(api)?;
                Ok((with_ingress >= m).then(|| start.elapsed()))
            });
            (creation.join(), provisioned)
        });
        let elapsed = start.elapsed();
        let (created, creation_took) =
            created.map_err(|_| anyhow::anyhow!("the creating thread panicked"))?;
        created?;
        scenario.figure(Figure::new("Services", m as u64, ""));
        scenario.figure(Figure::seconds(
            "creation of every Service took (driver, 4 connections)",
            creation_took.as_secs_f64(),
        ));
        let calls = calls_between(&before, &last);
        scenario.compare(&calls, &upstream::services(m, n, elapsed), None);
        let reads = last.successes("get_load_balancer") - before.successes("get_load_balancer");
        if reads > 0 {
            scenario.note(format!(
                "{reads} get_load_balancer calls: the controller asks read-only whether another controller implements a new Service's load balancer before ensuring it, one call more per Service than upstream."
            ));
        }
        let log = RequestLog::read(api)?;
        write_figures(scenario, &log, None);
        match provisioned? {
            Some(took) => scenario.figure(Figure::seconds(
                "time until every Service has its ingress",
                took.as_secs_f64(),
            )),
            None => bail!("not every Service had an ingress within {timeout:?}"),
        }
        Ok(())
    }

    /// Scenario 2: nothing changes for a window.
    fn steady(&mut self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let n = self.scale.nodes;
        let window = self.scale.steady_window;
        let ccm = self.ccm()?;
        self.wait(SETTLE)?;
        RequestLog::reset(self.api())?;
        let before = Metrics::read(ccm.metrics)?;
        let usage_before = Usage::read(ccm.pid)?;
        let window_rss = self.wait_sampling(window, ccm.pid)?;
        let after = Metrics::read(ccm.metrics)?;
        let usage = Usage::read(ccm.pid)?;
        let calls = calls_between(&before, &after);
        scenario.compare(&calls, &upstream::steady(n, window), Some(window));
        extrapolated(scenario, window);
        let cpu = usage.cpu_seconds - usage_before.cpu_seconds;
        scenario.figure(Figure::seconds("window", window.as_secs_f64()));
        scenario.figure(Figure::new(
            "CCM CPU time in the window",
            (cpu * 100.0).round() / 100.0,
            "s",
        ));
        scenario.figure(Figure::new(
            "CCM CPU, share of one core",
            (cpu / window.as_secs_f64() * 1000.0).round() / 10.0,
            "%",
        ));
        memory_figures(scenario, usage);
        scenario.figure(Figure::new(
            "CCM live heap at the window's end (jemalloc's bytes in live allocations)",
            (after.live_heap_mib()? * 10.0).round() / 10.0,
            "MiB",
        ));
        let window_rss_mib = window_rss as f64 / 1024.0;
        scenario.figure(Figure::new(
            "CCM RSS in the window, largest of 1 s samples",
            (window_rss_mib * 10.0).round() / 10.0,
            "MiB",
        ));
        write_figures(scenario, &RequestLog::read(self.api())?, None);
        if !self.scale.is_full() {
            // The targets are set for 5,000 nodes and 1,000 Services.
            return Ok(());
        }
        calls_target(
            scenario,
            "steady-state cloud calls per hour vs upstream's algorithm",
        );
        if let Some(limit) = rss_limit::established(n) {
            scenario.target(
                format!(
                    "CCM RSS in steady state at {n} nodes and {} Services (largest 1 s sample of the window)",
                    self.scale.services
                ),
                format!("≤ {limit:.0} MiB"),
                format!("{window_rss_mib:.1} MiB"),
                window_rss_mib <= limit,
            );
        }
        Ok(())
    }

    /// Scenario 3: every node's Ready condition posted every 10 s.
    fn heartbeats(&mut self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let ccm = self.ccm()?;
        let before = Metrics::read(ccm.metrics)?;
        let start = Instant::now();
        let mut longest = Duration::ZERO;
        let rounds = self.scale.heartbeat_rounds;
        for round in 0..rounds {
            let round_start = Instant::now();
            driver::heartbeat(self.api(), &self.nodes)?;
            longest = longest.max(round_start.elapsed());
            self.cluster.check_alive()?;
            if round + 1 < rounds {
                self.wait(HEARTBEAT_PERIOD.saturating_sub(round_start.elapsed()))?;
            }
        }
        // Let the last round's watch events reach the CCM and its passes settle.
        self.wait(SETTLE)?;
        let window = start.elapsed();
        let after = Metrics::read(ccm.metrics)?;
        let calls = calls_between(&before, &after);
        let sent = self.nodes.len() as u64 * u64::from(rounds);
        scenario.figure(Figure::new("heartbeats sent", sent, ""));
        scenario.figure(Figure::new("rounds, one every 10 s", u64::from(rounds), ""));
        scenario.figure(Figure::seconds(
            "longest round (driver, 4 connections)",
            longest.as_secs_f64(),
        ));
        scenario.figure(Figure::seconds(
            "window (rounds + 12 s to settle)",
            window.as_secs_f64(),
        ));
        if longest > HEARTBEAT_PERIOD {
            scenario.note("A round took longer than 10 s: the driver could not keep the kubelet's pace, so heartbeats came less often than every 10 s.");
        }
        scenario.compare(
            &calls,
            &upstream::heartbeats(self.nodes.len(), window),
            None,
        );
        let lb_calls: u64 = calls
            .iter()
            .filter(|((op, _), _)| LOAD_BALANCER_OPERATIONS.contains(&op.as_str()))
            .map(|(_, n)| n)
            .sum();
        scenario.target(
            "load-balancer calls during the heartbeat storm",
            "0",
            lb_calls.to_string(),
            lb_calls == 0,
        );
        Ok(())
    }

    /// Scenario 4: 1% of the nodes added (as kubelets register) and 1%
    /// deleted, at once.
    fn churn(&mut self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let m = self.scale.services;
        let ccm = self.ccm()?;
        // The heartbeat storm ended with a settling wait.
        RequestLog::reset(self.api())?;
        let before = Metrics::read(ccm.metrics)?;
        let start = Instant::now();
        let ChurnRound {
            k,
            updates,
            initialized_after,
            converged,
            last,
        } = self.churn_round(&before)?;
        let k64 = k as u64;
        let elapsed = start.elapsed();
        let calls = calls_between(&before, &last);
        let successes =
            last.successes("update_load_balancer") - before.successes("update_load_balancer");
        scenario.figure(Figure::new("nodes added", k64, ""));
        scenario.figure(Figure::new("nodes removed", k64, ""));
        scenario.figure(Figure::new("load balancers", m as u64, ""));
        scenario.figure(Figure::new(
            "load-balancer updates",
            format!("{updates} calls, {successes} successful"),
            "",
        ));
        scenario.figure(Figure::new(
            "node-set passes (successful updates ÷ load balancers)",
            (successes as f64 / m as f64 * 100.0).round() / 100.0,
            "",
        ));
        if let Some(t) = initialized_after {
            scenario.figure(Figure::seconds(
                "time until the new nodes are initialized",
                t.as_secs_f64(),
            ));
        }
        scenario.compare(
            &calls,
            &upstream::churn(k, m, self.nodes.len(), elapsed),
            None,
        );
        write_figures(scenario, &RequestLog::read(self.api())?, None);
        match converged {
            Some(t) => {
                scenario.figure(Figure::seconds(
                    "time to converge (last load-balancer update)",
                    t.as_secs_f64(),
                ));
                scenario.note(format!(
                    "Converged: every new node initialized, at least {m} successful load-balancer updates, and none for {} s after the last.",
                    CHURN_QUIET.as_secs()
                ));
            }
            None => bail!(
                "the churn had not converged after {:.0} s",
                elapsed.as_secs_f64()
            ),
        }
        let usage = Usage::read(ccm.pid)?;
        memory_figures(scenario, usage);
        let n = self.nodes.len();
        if self.scale.is_full() && n >= LARGE_PEAK_FROM {
            let peak = usage.peak_rss_kib as f64 / 1024.0;
            scenario.target(
                format!("CCM peak RSS (VmHWM) since its start, at {n} nodes and {m} Services"),
                format!("≤ {:.0} MiB", rss_limit::LARGE),
                format!("{peak:.1} MiB"),
                peak <= rss_limit::LARGE,
            );
        }
        Ok(())
    }

    /// Adds 1% of the nodes (as kubelets register) and deletes 1%, at once,
    /// and follows the CCM's metrics (from `before`) until the change has
    /// converged or the timeout passed.
    fn churn_round(&mut self, before: &Metrics) -> anyhow::Result<ChurnRound> {
        let m = self.scale.services;
        let ccm = self.ccm()?;
        let k = (self.nodes.len() / 100).max(1);
        let next = self.nodes.iter().max().copied().unwrap_or(0) + 1;
        let added: Vec<usize> = (next..next + k).collect();
        let removed: Vec<usize> = self.nodes[..k].to_vec();
        let start = Instant::now();
        driver::register_nodes(self.api(), &added, false)?;
        driver::delete_nodes(self.api(), &removed)?;
        self.nodes.retain(|i| !removed.contains(i));
        self.nodes.extend(&added);
        let k64 = k as u64;
        let timeout = Duration::from_secs_f64((6.0 * m as f64 / CLOUD_QPS).max(300.0));
        let (mut updates, mut last_update) = (0, Duration::ZERO);
        let mut initialized_after = None;
        let mut last = before.clone();
        let converged = driver::poll(timeout, Duration::from_millis(200), || {
            self.cluster.check_alive()?;
            last = Metrics::read(ccm.metrics)?;
            let delta = |op: &str| {
                last.sum("ccm_cloud_provider_calls_total", &[("operation", op)])
                    - before.sum("ccm_cloud_provider_calls_total", &[("operation", op)])
            };
            let now = start.elapsed();
            let update_calls = delta("update_load_balancer") as u64;
            if update_calls != updates {
                (updates, last_update) = (update_calls, now);
            }
            let initialized = last.nodes_initialized() - before.nodes_initialized() >= k64;
            if initialized && initialized_after.is_none() {
                initialized_after = Some(now);
            }
            let updated = last.successes("update_load_balancer")
                - before.successes("update_load_balancer")
                >= m as u64;
            let quiet = now.saturating_sub(last_update) >= CHURN_QUIET;
            Ok((initialized && updated && quiet)
                .then(|| last_update.max(initialized_after.unwrap_or_default())))
        })?;
        Ok(ChurnRound {
            k,
            updates,
            initialized_after,
            converged,
            last,
        })
    }

    /// Waits `how_long`, failing as soon as a process exits.
    fn wait(&mut self, how_long: Duration) -> anyhow::Result<()> {
        self.wait_checking(how_long, || Ok(()))
    }

    /// [`Established::wait`], sampling `pid`'s resident memory every
    /// [`RSS_SAMPLE_EVERY`]; returns the largest sample, in KiB.
    fn wait_sampling(&mut self, how_long: Duration, pid: u32) -> anyhow::Result<u64> {
        let mut largest = 0;
        self.wait_checking(how_long, || {
            largest = largest.max(Usage::read(pid)?.rss_kib);
            Ok(())
        })?;
        Ok(largest)
    }

    /// Waits `how_long`, checking every [`RSS_SAMPLE_EVERY`] (and at the
    /// end) that every process is alive and running `each`.
    fn wait_checking(
        &mut self,
        how_long: Duration,
        mut each: impl FnMut() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let until = Instant::now() + how_long;
        loop {
            self.cluster.check_alive()?;
            each()?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(RSS_SAMPLE_EVERY));
        }
    }
}

/// A steady window's target: our calls at most 1% of upstream's.
fn calls_target(scenario: &mut Scenario, what: &str) {
    let (ours, theirs) = totals(&scenario.calls);
    let share = ours as f64 / theirs * 100.0;
    scenario.target(
        what,
        "≤ 1%",
        format!("{ours} vs {theirs:.0}: {share:.2}%"),
        share <= 1.0,
    );
}

/// Says that a window's calls per hour are extrapolated from it.
fn extrapolated(scenario: &mut Scenario, window: Duration) {
    scenario.note(format!(
        "Calls per hour are extrapolated from a {:.0}-second window (× {:.0}).",
        window.as_secs_f64(),
        3600.0 / window.as_secs_f64()
    ));
}

fn memory_figures(scenario: &mut Scenario, usage: Usage) {
    scenario.figure(Figure::new(
        "CCM peak RSS since its start (VmHWM)",
        (usage.peak_rss_kib as f64 / 1024.0 * 10.0).round() / 10.0,
        "MiB",
    ));
    scenario.figure(Figure::new(
        "CCM RSS now (VmRSS)",
        (usage.rss_kib as f64 / 1024.0 * 10.0).round() / 10.0,
        "MiB",
    ));
    scenario.figure(Figure::new(
        "CCM CPU time since its start",
        (usage.cpu_seconds * 100.0).round() / 100.0,
        "s",
    ));
}
