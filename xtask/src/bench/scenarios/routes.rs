//! Scenario 6: a route burst. The measured CCM starts on a cluster whose
//! nodes are initialized and have pod CIDRs, and a cloud without routes.
//! It runs on a cluster of its own: the routes' Warning events and
//! conditions would otherwise colour the steady-state figures.

use std::path::Path;
use std::time::Duration;

use anyhow::bail;

use super::super::driver;
use super::super::harness::{Binaries, CLOUD_QPS, Cluster, KubeApiQps};
use super::super::measurements::{Metrics, RequestLog, calls_between};
use super::super::upstream;
use super::{Figure, Scale, Scenario, Status, note_lease_loss, write_figures};

/// Runs the route burst; a failure is the scenario stopping early.
pub(crate) fn run(binaries: &Binaries, dir: &Path, scale: &Scale, qps: KubeApiQps) -> Scenario {
    let n = scale.route_nodes;
    let mut scenario = Scenario::new(
        format!("routes-{}", qps.id()),
        format!("Route burst: {n} nodes with pod CIDRs"),
        qps,
    );
    if let Err(err) = measure(&mut scenario, binaries, dir, n, qps) {
        scenario.status = Status::Incomplete(format!("{err:#}"));
    }
    scenario
}

fn measure(
    scenario: &mut Scenario,
    binaries: &Binaries,
    dir: &Path,
    n: usize,
    qps: KubeApiQps,
) -> anyhow::Result<()> {
    let mut cluster = Cluster::prepared(dir, binaries, n, true)?;
    RequestLog::reset(cluster.api)?;
    let ccm = cluster.start_ccm(qps, None)?;
    let start = ccm.started;
    scenario.note(
        "Measured from the CCM's start: its nodes are initialized and have pod CIDRs, the cloud has no route.",
    );
    // The cloud's rate limit alone needs n / 20 s.
    let timeout = Duration::from_secs_f64((4.0 * n as f64 / CLOUD_QPS).max(300.0));
    let mut last = Metrics::default();
    let routes = driver::poll(timeout, Duration::from_millis(250), || {
        cluster.check_alive()?;
        last = Metrics::read(ccm.metrics)?;
        Ok((last.successes("create_route") >= n as u64).then(|| start.elapsed()))
    });
    let elapsed = start.elapsed();
    let calls = calls_between(&Metrics::default(), &last);
    scenario.figure(Figure::new("nodes", n as u64, ""));
    scenario.figure(Figure::new(
        "routes created",
        last.successes("create_route"),
        "",
    ));
    scenario.figure(Figure::new(
        "route passes (route_controller_route_sync)",
        last.sum("route_controller_route_sync_total", &[]) as u64,
        "",
    ));
    scenario.compare(&calls, &upstream::routes(n, elapsed), None);
    let creates: u64 = last.sum(
        "ccm_cloud_provider_calls_total",
        &[("operation", "create_route")],
    ) as u64;
    let throttled = last.sum(
        "ccm_cloud_provider_calls_total",
        &[("operation", "create_route"), ("outcome", "throttled")],
    ) as u64;
    if throttled > creates / 2 {
        scenario.note(format!(
            "{throttled} of {creates} create_route calls were answered Throttled: the route controller keeps up to 200 creates in flight against a cloud allowing 20 calls/s, and the CCM's pacing (after a Throttled answer it spaces its calls by the cloud's retry-after) did not keep most of them within the limit."
        ));
    }
    if let Err(err) = &routes {
        note_lease_loss(scenario, err);
    }
    let api = cluster.api;
    let conditions = match &routes {
        Ok(Some(_)) => driver::poll(Duration::from_secs(300), Duration::from_secs(2), || {
            cluster.check_alive()?;
            Ok((driver::node_census(api)?.routed >= n).then(|| start.elapsed()))
        }),
        _ => Ok(None),
    };
    write_figures(scenario, &RequestLog::read(api)?, Some(n));
    match routes? {
        Some(took) => scenario.figure(Figure::seconds(
            "time until every route exists",
            took.as_secs_f64(),
        )),
        None => bail!(
            "{} of {n} routes after {:.0} s",
            last.successes("create_route"),
            elapsed.as_secs_f64()
        ),
    }
    match conditions? {
        Some(took) => scenario.figure(Figure::seconds(
            "time until every node has NetworkUnavailable=False",
            took.as_secs_f64(),
        )),
        None => bail!("not every node got NetworkUnavailable=False within 300 s"),
    }
    cluster.stop_ccm()
}
