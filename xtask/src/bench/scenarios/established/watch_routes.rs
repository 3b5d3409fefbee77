//! Scenario 2 again, with upstream's alpha gate
//! `CloudControllerManagerWatchBasedRoutesReconciliation` (k8s.io/
//! cloud-provider 0.35 on): the CCM restarted with it, left until its
//! start-up work is over, then a quiet window. Its route controller lists
//! routes on node events and at each informer resync (every 12 to 24 hours)
//! instead of every 10 s, as upstream's does with the gate; the comparison
//! is with upstream's algorithm under the same gate.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::super::super::measurements::{Metrics, Usage, calls_between};
use super::super::super::upstream;
use super::super::{Figure, Scenario};
use super::{Established, SETTLE, calls_target, extrapolated};

/// The flag the CCM is restarted with.
const GATE: &str = "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true";

/// The restarted CCM's start-up work is over once it made no cloud call for
/// this long.
const QUIET: Duration = Duration::from_secs(15);

/// How long the start-up work may take: a status refresh of every node and
/// a sync of every Service at 20 cloud calls a second, with room to spare.
const START_UP_LIMIT: Duration = Duration::from_secs(600);

/// Every cloud call the CCM serving `metrics` made so far.
fn calls_total(metrics: std::net::SocketAddr) -> anyhow::Result<f64> {
    Ok(Metrics::read(metrics)?.sum("ccm_cloud_provider_calls_total", &[]))
}

impl Established {
    /// The CCM restarted with [`GATE`], then a steady window.
    pub(super) fn steady_watch_routes(&mut self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let n = self.scale.nodes;
        let window = self.scale.steady_window;
        scenario.ccm_flags = format!("{} and {GATE}", scenario.ccm_flags);
        self.ccm = None;
        self.cluster.stop_ccm()?;
        let ccm = self
            .cluster
            .start_ccm_with(self.qps, None, &[GATE.to_owned()])?;
        self.ccm = Some(ccm);
        let started = Instant::now();
        let mut last = calls_total(ccm.metrics)?;
        let mut quiet_since = Instant::now();
        while quiet_since.elapsed() < QUIET {
            if started.elapsed() > START_UP_LIMIT {
                bail!("the restarted CCM still made cloud calls after {START_UP_LIMIT:?}");
            }
            self.wait(Duration::from_secs(1))?;
            let now = calls_total(ccm.metrics)?;
            if now != last {
                (last, quiet_since) = (now, Instant::now());
            }
        }
        scenario.figure(Figure::seconds(
            "restart until the CCM's start-up calls were over",
            started.elapsed().as_secs_f64(),
        ));
        self.wait(SETTLE)?;
        let before = Metrics::read(ccm.metrics)?;
        let window_rss = self.wait_sampling(window, ccm.pid)?;
        let after = Metrics::read(ccm.metrics)?;
        let usage = Usage::read(ccm.pid)?;
        let calls = calls_between(&before, &after);
        scenario.compare(
            &calls,
            &upstream::steady_watch_routes(n, window),
            Some(window),
        );
        extrapolated(scenario, window);
        scenario.figure(Figure::seconds("window", window.as_secs_f64()));
        scenario.figure(Figure::new(
            "CCM RSS in the window, largest of 1 s samples",
            (window_rss as f64 / 1024.0 * 10.0).round() / 10.0,
            "MiB",
        ));
        scenario.figure(Figure::new(
            "CCM RSS now (VmRSS)",
            (usage.rss_kib as f64 / 1024.0 * 10.0).round() / 10.0,
            "MiB",
        ));
        if !self.scale.is_full() {
            return Ok(());
        }
        calls_target(
            scenario,
            "steady-state cloud calls per hour vs upstream's algorithm, both with the gate",
        );
        Ok(())
    }
}
