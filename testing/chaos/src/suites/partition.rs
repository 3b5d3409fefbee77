//! Partition: the test API server refuses every request of the leader's
//! user (503, its watches cut) for longer than the renew deadline, while
//! the churn goes on. The leader must stop mutating before its lease could
//! have expired, and another replica must take over.

use std::time::{Duration, Instant};

use anyhow::Context;
use ccm_test_apiserver::{Failure, RequestMatch};
use serde_json::{Value, json};

use super::failover::{Cluster, Finished, slot_of};
use super::ms;
use crate::env::{Binaries, replica_user};
use crate::lease;

/// How long a partitioned leader may take to exit.
const EXIT_WITHIN: Duration = Duration::from_secs(30);

/// Partitions the leader `rounds` times.
pub(crate) async fn run(binaries: &Binaries, rounds: u32) -> anyhow::Result<Value> {
    let mut cluster = Cluster::start(binaries, 7).await?;
    let mut outcomes = Vec::new();
    for round in 0..rounds {
        let leader = cluster.wait_for_leader(None, Instant::now()).await?;
        let slot = slot_of(&leader.holder)
            .with_context(|| format!("which replica is {}", leader.holder))?;
        let start = Instant::now();
        cluster.env.api.fail_next(
            RequestMatch::any().user(replica_user(slot)),
            Failure::service_unavailable(),
            u32::MAX,
        );
        cluster.env.api.close_all_watches();
        let next = cluster
            .wait_for_leader(Some(&leader.holder), start)
            .await
            .with_context(|| format!("partition {round}: nobody took over"))?;
        let took_over = start.elapsed();
        let replica = cluster.replicas[slot]
            .as_mut()
            .context("the partitioned process")?;
        let exited = replica.wait(EXIT_WITHIN).await.is_ok();
        let stepped_down = start.elapsed();
        cluster.env.api.clear_faults();
        cluster.respawn_exited()?;

        // The partitioned replica's last mutation against its term.
        let calls = cluster.env.cloud.calls().await?;
        let terms = lease::terms(&cluster.recorder.records());
        let term = terms
            .iter()
            .rev()
            .find(|t| t.holder == leader.holder)
            .context("the partitioned leader's term")?;
        let last_mutation = calls
            .iter()
            .filter(|c| c.applied && c.caller == leader.holder)
            .map(|c| c.started_us)
            .max();
        let margin_ms = last_mutation.map(|t| (term.valid_until_us - t) / 1000);
        println!(
            "  partition {}: {} cut off; {} took over in {} ms; the partitioned replica {} ({} ms); its last mutation {} before its lease could expire",
            round + 1,
            leader.holder,
            next.holder,
            took_over.as_millis(),
            if exited { "exited" } else { "did NOT exit" },
            stepped_down.as_millis(),
            margin_ms.map_or("(none)".to_owned(), |m| format!("{m} ms")),
        );
        outcomes.push(json!({
            "partitioned": leader.holder,
            "new_leader": next.holder,
            "took_over_ms": ms(took_over),
            "partitioned_exited": exited,
            "last_mutation_before_expiry_ms": margin_ms,
        }));
    }
    let Finished {
        changes,
        converged,
        fencing,
    } = cluster.finish(Duration::from_secs(60)).await?;
    let all_exited = outcomes.iter().all(|o| o["partitioned_exited"] == true);
    let all_before = outcomes.iter().all(|o| {
        o["last_mutation_before_expiry_ms"]
            .as_i64()
            .is_none_or(|m| m >= 0)
    });
    println!(
        "partition: {rounds} partitions, {} mutations judged, {} unfenced, {} overlapping, converged: {}",
        fencing.mutations,
        fencing.unfenced.len(),
        fencing.overlapping.len(),
        converged.is_ok()
    );
    Ok(json!({
        "suite": "partition",
        "partitions": rounds,
        "churn_changes": changes,
        "mutations_judged": fencing.mutations,
        "unfenced": fencing.unfenced.len(),
        "overlapping": fencing.overlapping.len(),
        "rounds": outcomes,
        "converged_after_ms": converged.as_ref().ok().map(|d| ms(*d)),
        "passed": all_exited && all_before && fencing.unfenced.is_empty() && fencing.overlapping.is_empty() && converged.is_ok(),
    }))
}
