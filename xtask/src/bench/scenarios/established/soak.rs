//! Node churn kept up for a long window: each change is made as soon as the
//! last converged, and the CCM's memory is sampled at every convergence, so
//! a leak (state kept for nodes that are gone) shows as a slope.
//!
//! The target is on the live heap (`ccm_heap_allocated_bytes`, jemalloc's
//! bytes in live allocations), where a leak lands. RSS is reported beside
//! it; it also moves with the pages jemalloc keeps for reuse and returns
//! later, which made a 30-minute RSS series swing by 9 MiB between rounds
//! with no growth in it.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::super::super::measurements::{Metrics, Usage};
use super::super::{Figure, Scenario};
use super::Established;

/// The live heap's fitted line may rise this much per hour at most.
const SLOPE_LIMIT_MIB_PER_HOUR: f64 = 2.0;

impl Established {
    /// Churn rounds until the soak window has passed (each round bounded by
    /// its own timeout), then the memory's slope.
    pub(super) fn soak(&mut self, scenario: &mut Scenario) -> anyhow::Result<()> {
        let window = self.scale.soak.context("no soak window at this size")?;
        let ccm = self.ccm()?;
        let start = Instant::now();
        let first = Usage::read(ccm.pid)?;
        let first_heap = Metrics::read(ccm.metrics)?.live_heap_mib()?;
        let mut samples = Vec::new();
        let mut longest = Duration::ZERO;
        while start.elapsed() < window {
            let before = Metrics::read(ccm.metrics)?;
            let round = self.churn_round(&before)?;
            let Some(took) = round.converged else {
                bail!(
                    "round {} had not converged; {:.0} s into the soak",
                    samples.len() + 1,
                    start.elapsed().as_secs_f64()
                );
            };
            longest = longest.max(took);
            let rss = Usage::read(ccm.pid)?.rss_kib as f64 / 1024.0;
            let heap = Metrics::read(ccm.metrics)?.live_heap_mib()?;
            samples.push(Sample {
                hours: start.elapsed().as_secs_f64() / 3600.0,
                rss,
                heap,
            });
        }
        let usage = Usage::read(ccm.pid)?;
        let tenth = |x: f64| (x * 10.0).round() / 10.0;
        scenario.figure(Figure::seconds("soak", start.elapsed().as_secs_f64()));
        scenario.figure(Figure::new("churn rounds", samples.len() as u64, ""));
        scenario.figure(Figure::seconds(
            "longest round until converged",
            longest.as_secs_f64(),
        ));
        scenario.figure(Figure::new(
            "CCM RSS before the soak",
            tenth(first.rss_kib as f64 / 1024.0),
            "MiB",
        ));
        scenario.figure(Figure::new(
            "CCM live heap before the soak",
            tenth(first_heap),
            "MiB",
        ));
        let series = |value: fn(&Sample) -> f64| {
            samples
                .iter()
                .map(|s| format!("{:.1}", value(s)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        scenario.figure(Figure::new(
            "CCM RSS at each convergence",
            series(|s| s.rss),
            "MiB",
        ));
        scenario.figure(Figure::new(
            "CCM live heap at each convergence",
            series(|s| s.heap),
            "MiB",
        ));
        scenario.figure(Figure::new(
            "CCM peak RSS since its start (VmHWM)",
            tenth(usage.peak_rss_kib as f64 / 1024.0),
            "MiB",
        ));
        // The first round warms up (the first churn's allocations); the
        // slopes are fitted to the rest.
        let fitted = |value: fn(&Sample) -> f64| {
            let points: Vec<(f64, f64)> = samples
                .get(1..)?
                .iter()
                .map(|s| (s.hours, value(s)))
                .collect();
            slope(&points)
        };
        let (Some(rss_slope), Some(heap_slope)) = (fitted(|s| s.rss), fitted(|s| s.heap)) else {
            scenario.note("Too few rounds after the first to fit a slope.");
            return Ok(());
        };
        let hundredth = |x: f64| (x * 100.0).round() / 100.0;
        scenario.figure(Figure::new(
            "RSS slope, least squares over the rounds after the first",
            hundredth(rss_slope),
            "MiB/h",
        ));
        scenario.figure(Figure::new(
            "live heap slope, least squares over the rounds after the first",
            hundredth(heap_slope),
            "MiB/h",
        ));
        if self.scale.is_full() {
            scenario.target(
                "CCM live heap flat under churn (slope of the fitted line)",
                format!("≤ {SLOPE_LIMIT_MIB_PER_HOUR:.0} MiB per hour"),
                format!("{heap_slope:.2} MiB per hour"),
                heap_slope <= SLOPE_LIMIT_MIB_PER_HOUR,
            );
        }
        Ok(())
    }
}

/// The CCM's memory when a churn round has converged.
struct Sample {
    /// Since the soak started.
    hours: f64,
    /// Resident memory, MiB.
    rss: f64,
    /// Live heap, MiB.
    heap: f64,
}

/// The least-squares slope of `points` (x, y); `None` for fewer than 3
/// points or no spread in x.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_is_the_fitted_lines() {
        let rising: Vec<(f64, f64)> = (0..5)
            .map(|i| (f64::from(i), 40.0 + 2.0 * f64::from(i)))
            .collect();
        assert!((slope(&rising).unwrap() - 2.0).abs() < 1e-9);
        let flat = [(0.0, 40.0), (1.0, 41.0), (2.0, 40.0), (3.0, 41.0)];
        assert!(slope(&flat).unwrap().abs() < 0.5);
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 2.0)]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
    }
}
