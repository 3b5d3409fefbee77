//! Scenario 1: a burst of new nodes registering while the CCM runs.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::super::driver::{self, NodeCensus};
use super::super::harness::{BATCH_SIZE, Binaries, Cluster, KubeApiQps};
use super::super::heap;
use super::super::measurements::{Metrics, RequestLog, Usage, calls_between};
use super::super::upstream;
use super::{Figure, Scenario, Series, Status, note_lease_loss, rss_limit, write_figures};

/// How often initialization progress is sampled for the plot.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The CCM's count of the metadata calls its periodic refresh made.
const REFRESH_CALLS: &str = "ccm_node_refresh_cloud_calls_total";

/// Registers `nodes` nodes at once against a fresh API server and a CCM
/// running with `qps`, and measures their initialization. A failure of the
/// benchmark itself is reported as the scenario stopping early.
pub(crate) fn run(binaries: &Binaries, dir: &Path, nodes: usize, qps: KubeApiQps) -> Scenario {
    let scenario = || {
        Scenario::new(
            format!("burst-{nodes}-{}", qps.id()),
            format!("Burst of {nodes} new nodes"),
            qps,
        )
    };
    measure(scenario(), binaries, dir, nodes, qps).unwrap_or_else(|err| {
        let mut failed = scenario();
        failed.status = Status::Incomplete(format!("{err:#}"));
        failed
    })
}

fn measure(
    mut scenario: Scenario,
    binaries: &Binaries,
    dir: &Path,
    nodes: usize,
    qps: KubeApiQps,
) -> anyhow::Result<Scenario> {
    let mut cluster = Cluster::start(dir, binaries, 0)?;
    let ccm = cluster.start_ccm(qps, None)?;
    RequestLog::reset(cluster.api)?;
    let before = Metrics::read(ccm.metrics)?;

    // Kubelets need at most 2 writes per node from the CCM, all through one
    // client: that bounds the burst at 2N / qps; allow three times as long.
    let bound = 2.0 * nodes as f64 / qps.qps();
    let timeout = Duration::from_secs_f64(bound * 3.0 + 60.0);
    let indices: Vec<usize> = (1..=nodes).collect();
    let api = cluster.api;
    let start = Instant::now();
    let mut points = vec![(0.0, 0)];
    let mut rss = Vec::new();
    let mut last = before.clone();
    let mut registered_after = None;
    let failed = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| {
        let registration = scope.spawn(|| {
            let result = driver::register_nodes(api, &indices, false);
            failed.store(result.is_err(), Ordering::Relaxed);
            (result, start.elapsed())
        });
        let stop = || failed.load(Ordering::Relaxed);
        let outcome = sample(
            &mut cluster,
            ccm.metrics,
            start,
            timeout,
            nodes,
            &stop,
            |t, m| {
                points.push((t, m.nodes_initialized()));
                if let Ok(usage) = Usage::read(ccm.pid) {
                    rss.push((t, usage.rss_kib as f64 / 1024.0));
                }
                last = m.clone();
            },
        );
        match registration.join() {
            Ok((result, took)) => {
                registered_after = Some(took);
                result.map(|()| outcome)
            }
            Err(_) => anyhow::bail!("the registering thread panicked"),
        }
    })?;
    let elapsed = start.elapsed();

    scenario.figure(Figure::new("nodes", nodes as u64, ""));
    if let Some(took) = registered_after {
        scenario.figure(Figure::seconds(
            "registration of every node took (driver, 4 connections)",
            took.as_secs_f64(),
        ));
    }
    let initialized = last.nodes_initialized();
    if let Some((first, _)) = points.iter().find(|(_, n)| *n > 0) {
        scenario.figure(Figure::seconds(
            "time until the first node is initialized",
            *first,
        ));
    }
    match &outcome {
        Ok(Some(all)) => {
            scenario.figure(Figure::seconds(
                "time until every node is initialized",
                *all,
            ));
        }
        Ok(None) => {
            scenario.status = Status::Incomplete(format!(
                "{initialized} of {nodes} nodes initialized after {:.0} s",
                elapsed.as_secs_f64()
            ));
        }
        Err(err) => {
            note_lease_loss(&mut scenario, err);
            scenario.status = Status::Incomplete(format!(
                "{err:#} — after {:.1} s, with {initialized} of {nodes} nodes initialized",
                elapsed.as_secs_f64()
            ));
        }
    }
    scenario.figure(Figure::seconds(
        format!(
            "lower bound at {} qps: 2 writes per node through one client",
            qps.qps()
        ),
        bound,
    ));
    let delay_count = last.sum(
        "node_controller_cloud_provider_taint_removal_delay_seconds_count",
        &[],
    );
    if delay_count > 0.0 {
        let delay_sum = last.sum(
            "node_controller_cloud_provider_taint_removal_delay_seconds_sum",
            &[],
        );
        scenario.figure(Figure::seconds(
            "mean time from a node's creation to its taint's removal",
            delay_sum / delay_count,
        ));
    }
    let census = driver::node_census(api)?;
    scenario.figure(Figure::new(
        "initialized nodes in the API server at the end",
        census.initialized as u64,
        "",
    ));

    let calls = calls_between(&before, &last);
    let metadata_calls: u64 = calls
        .iter()
        .filter(|((op, _), _)| op.ends_with("_metadata"))
        .map(|(_, n)| n)
        .sum();
    // A burst that outlasts `--node-status-update-frequency` (5 min) shares
    // its window with a refresh of the nodes it already initialized: upstream
    // does that refresh too, one call per node. The CCM counts its refresh's
    // calls apart; the target is on the rest.
    let refresh = |metrics: &Metrics| metrics.sum(REFRESH_CALLS, &[]);
    let refresh_calls = (refresh(&last) - refresh(&before)).max(0.0) as u64;
    scenario.figure(Figure::new(
        "metadata calls of the 5-minute status refresh of nodes already initialized",
        refresh_calls,
        "",
    ));
    let metadata_calls = metadata_calls.saturating_sub(refresh_calls);
    let log = RequestLog::read(api)?;
    write_figures(&mut scenario, &log, Some(nodes));
    let mut peak_rss_mib = None;
    if matches!(outcome, Ok(Some(_))) {
        // The process is gone when the burst stopped it.
        let usage = Usage::read(ccm.pid)?;
        peak_rss_mib = Some(usage.peak_rss_kib as f64 / 1024.0);
        scenario.figure(Figure::new(
            "CCM peak RSS (VmHWM)",
            (usage.peak_rss_kib as f64 / 1024.0 * 10.0).round() / 10.0,
            "MiB",
        ));
        scenario.figure(Figure::new(
            "CCM CPU time since its start",
            (usage.cpu_seconds * 100.0).round() / 100.0,
            "s",
        ));
        // Only now: symbolizing the profile maps the binary's symbol
        // tables into the CCM, some 40 MiB of resident memory the peak
        // above must not include.
        match heap::read(ccm.metrics) {
            Ok(heap) => heap::note(
                &mut scenario,
                &heap,
                usage,
                "once every node was initialized",
            ),
            Err(err) => scenario.note(format!("The heap profile could not be read: {err:#}")),
        }
    }
    scenario.compare(&calls, &upstream::burst(nodes, elapsed, qps.qps()), None);
    let measured = Measured {
        outcome: &outcome,
        metadata_calls,
        log: &log,
        census,
        peak_rss_mib,
    };
    targets(&mut scenario, nodes, qps, &measured);
    scenario.series = Some(Series {
        label: match &outcome {
            Err(_) => format!("{nodes} nodes (the CCM exited)"),
            _ => format!("{nodes} nodes"),
        },
        panel: qps_panel(qps),
        total: nodes,
        points,
        rss,
    });
    cluster.stop_ccm()?;
    Ok(scenario)
}

/// The plot panel of a QPS setting.
fn qps_panel(qps: KubeApiQps) -> String {
    match qps {
        KubeApiQps::Default => "--kube-api-qps=20 (upstream's default)".to_owned(),
        KubeApiQps::Raised { qps, .. } => format!("--kube-api-qps={qps}"),
    }
}

/// Samples the CCM's metrics until `total` nodes are initialized (the
/// seconds it took), `timeout` passes or `stop` says so (`None`), or a
/// process exits (the error); `each` sees every sample.
fn sample(
    cluster: &mut Cluster,
    metrics: std::net::SocketAddr,
    start: Instant,
    timeout: Duration,
    total: usize,
    stop: &dyn Fn() -> bool,
    mut each: impl FnMut(f64, &Metrics),
) -> anyhow::Result<Option<f64>> {
    loop {
        cluster.check_alive()?;
        if stop() {
            return Ok(None);
        }
        if let Ok(m) = Metrics::read(metrics) {
            let t = start.elapsed().as_secs_f64();
            each(t, &m);
            if m.nodes_initialized() >= total as u64 {
                return Ok(Some(t));
            }
        }
        if start.elapsed() > timeout {
            return Ok(None);
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
}

/// What a burst measured, for its targets.
struct Measured<'a> {
    /// The seconds until every node was initialized, as [`sample`] says.
    outcome: &'a anyhow::Result<Option<f64>>,
    metadata_calls: u64,
    log: &'a RequestLog,
    census: NodeCensus,
    /// `None` when the burst did not complete.
    peak_rss_mib: Option<f64>,
}

fn targets(scenario: &mut Scenario, nodes: usize, qps: KubeApiQps, measured: &Measured<'_>) {
    let Measured {
        outcome,
        metadata_calls,
        log,
        census,
        peak_rss_mib,
    } = *measured;
    // The targets are set for 5,000 nodes, and for 10,000 at the raised QPS.
    let seconds = match (nodes, qps) {
        (5000, _) => 60.0,
        (10_000, KubeApiQps::Raised { .. }) => 30.0,
        _ => return,
    };
    let all_initialized = census.initialized == nodes;
    {
        let measured = match outcome {
            Ok(Some(t)) => format!("{t:.1} s"),
            _ => format!("not reached: {} of {nodes} initialized", census.initialized),
        };
        let met = matches!(outcome, Ok(Some(t)) if *t <= seconds) && all_initialized;
        scenario.target(
            format!("{nodes}-node burst fully initialized"),
            format!("≤ {seconds:.0} s"),
            measured,
            met,
        );
    }
    let batches = nodes.div_ceil(BATCH_SIZE);
    let allowed = (1.05 * batches as f64).floor() as u64;
    scenario.target(
        "metadata calls to initialize the nodes",
        format!("≤ 1.05 × ceil({nodes} / {BATCH_SIZE}) = {allowed}"),
        format!("{metadata_calls}"),
        metadata_calls <= allowed && all_initialized,
    );
    let per_node = log.ccm_node_writes();
    let most = per_node.values().copied().max().unwrap_or(0);
    let mean = per_node.values().sum::<u64>() as f64 / nodes.max(1) as f64;
    scenario.target(
        "API server writes per node",
        "≤ 2",
        format!("mean {mean:.2}, most {most}"),
        most <= 2 && all_initialized && log.dropped() == 0,
    );
    if let Some(limit) = rss_limit::burst(nodes) {
        scenario.target(
            "CCM peak RSS (VmHWM) during the burst",
            format!("≤ {limit:.0} MiB"),
            peak_rss_mib.map_or_else(
                || "not measured: the burst did not complete".to_owned(),
                |p| format!("{p:.1} MiB"),
            ),
            peak_rss_mib.is_some_and(|p| p <= limit),
        );
    }
}
