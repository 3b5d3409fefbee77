//! Faults: for a fixed time, 30% of cloud calls fail (throttled, 503, or
//! timed out after being applied) while the API server answers some
//! requests 500, cuts every watch, expires some (410) and answers slowly,
//! all under churn. Then the faults stop: the world must converge within a
//! bound, with nothing leaked or duplicated, and CPU and request rates must
//! stay bounded throughout (no hot loop).

use std::time::{Duration, Instant};

use ccm_test_apiserver::{Failure, RequestMatch, Verb};
use serde_json::{Value, json};

use super::failover::{Cluster, Finished};
use super::ms;
use crate::env::Binaries;

/// How long the world may take to converge once the faults stop.
pub(crate) const CONVERGE_WITHIN: Duration = Duration::from_secs(60);
/// The most CPU the replicas may use together during the faults, in cores.
const MAX_CPU_CORES: f64 = 0.5;
/// The most cloud calls per second during the faults.
const MAX_CLOUD_CALLS_PER_S: f64 = 50.0;
/// The most API requests per second during the faults, all replicas and
/// the churn driver together.
const MAX_API_REQUESTS_PER_S: f64 = 150.0;

/// CPU time (user and system) of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the command name, which ends with the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

fn api_requests(cluster: &Cluster) -> u64 {
    let stats = cluster.env.api.stats();
    stats.requests.iter().map(|r| r.count).sum::<u64>() + stats.non_resource.values().sum::<u64>()
}

/// Runs the faults for `window`.
pub(crate) async fn run(binaries: &Binaries, window: Duration) -> anyhow::Result<Value> {
    let mut cluster = Cluster::start(binaries, 1234).await?;
    cluster
        .env
        .cloud
        .set_faults(json!({ "error_rate": 0.3, "latency_ms": 20 }))
        .await?;
    cluster.env.api.set_latency(Duration::from_millis(50));
    let calls_before = cluster.env.cloud.calls().await?.len();
    let requests_before = api_requests(&cluster);
    let start = Instant::now();
    let mut cpu = Duration::ZERO;
    let mut tick = 0u32;
    while start.elapsed() < window {
        tick += 1;
        // Every second: the next three requests fail with 500.
        cluster
            .env
            .api
            .fail_next(RequestMatch::any(), Failure::internal_error(), 3);
        if tick.is_multiple_of(5) {
            cluster.env.api.close_all_watches();
        }
        if tick.is_multiple_of(10) {
            cluster
                .env
                .api
                .fail_next(RequestMatch::verb(Verb::Watch), Failure::expired(), 2);
        }
        let before: Vec<(u32, Duration)> = cluster
            .replicas
            .iter()
            .flatten()
            .filter_map(|r| r.pid())
            .map(|pid| (pid, cpu_time(pid)))
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await;
        cpu += before
            .iter()
            .map(|(pid, t)| cpu_time(*pid).saturating_sub(*t))
            .sum::<Duration>();
        // A replica that lost its lease to the faults exits; Kubernetes
        // would restart it.
        cluster.respawn_exited()?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cloud_rate = (cluster.env.cloud.calls().await?.len() - calls_before) as f64 / elapsed;
    let api_rate = (api_requests(&cluster) - requests_before) as f64 / elapsed;
    let cpu_cores = cpu.as_secs_f64() / elapsed;

    cluster
        .env
        .cloud
        .set_faults(json!({ "error_rate": 0.0, "latency_ms": 0 }))
        .await?;
    cluster.env.api.clear_faults();
    let Finished {
        changes,
        converged,
        fencing,
    } = cluster.finish(CONVERGE_WITHIN).await?;
    let (leaked, duplicated) = match &converged {
        Ok(_) => (0, 0),
        Err(v) => (v.leaked.len(), v.duplicated.len()),
    };
    println!(
        "faults: {:.0} s of faults ({changes} changes); CPU {cpu_cores:.3} cores (bound {MAX_CPU_CORES}), cloud {cloud_rate:.1} calls/s (bound {MAX_CLOUD_CALLS_PER_S}), API {api_rate:.1} requests/s (bound {MAX_API_REQUESTS_PER_S}); converged {} after the faults stopped (bound {} s); {leaked} leaked, {duplicated} duplicated, {} unfenced",
        elapsed,
        converged
            .as_ref()
            .map_or("never".to_owned(), |d| format!("{} ms", d.as_millis())),
        CONVERGE_WITHIN.as_secs(),
        fencing.unfenced.len() + fencing.overlapping.len(),
    );
    if let Err(verdict) = &converged {
        println!("  not converged: {verdict:?}");
    }
    Ok(json!({
        "suite": "faults",
        "fault_seconds": elapsed,
        "cloud_error_rate": 0.3,
        "churn_changes": changes,
        "cpu_cores": cpu_cores,
        "cloud_calls_per_s": cloud_rate,
        "api_requests_per_s": api_rate,
        "converged_after_ms": converged.as_ref().ok().map(|d| ms(*d)),
        "converge_bound_ms": ms(CONVERGE_WITHIN),
        "leaked": leaked,
        "duplicated": duplicated,
        "unfenced": fencing.unfenced.len() + fencing.overlapping.len(),
        "replicas_started": cluster.env.replicas_started(),
        "passed": converged.is_ok()
            && cpu_cores <= MAX_CPU_CORES
            && cloud_rate <= MAX_CLOUD_CALLS_PER_S
            && api_rate <= MAX_API_REQUESTS_PER_S
            && fencing.unfenced.is_empty()
            && fencing.overlapping.is_empty(),
    }))
}
