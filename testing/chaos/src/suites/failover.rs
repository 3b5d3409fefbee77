//! Failover: three replicas with short leases under continuous Service and
//! node churn; the leader is killed (SIGKILL) or frozen (SIGSTOP, then
//! SIGCONT once another leads) again and again. Judged from the cloud's
//! call log and the Lease's history: no mutation outside its caller's
//! term, none after another replica's term began; failover times.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use ccm_test_support::Ccm;
use serde_json::{Value, json};

use super::{ms, percentile};
use crate::env::{Binaries, Env, Timing, replica_user};
use crate::invariants;
use crate::lease::{self, Recorder};
use crate::scenario::World;

/// How long a new leader may take to appear.
const FAILOVER_WITHIN: Duration = Duration::from_secs(30);
/// How long a resumed, deposed leader may take to exit.
const EXIT_WITHIN: Duration = Duration::from_secs(20);
/// How often the churn driver changes something.
const CHURN_EVERY: Duration = Duration::from_millis(300);

/// The slot of the replica with `identity` (its `HOSTNAME` prefix).
pub(crate) fn slot_of(identity: &str) -> Option<usize> {
    (0..3).find(|slot| identity.starts_with(&format!("{}_", replica_user(*slot))))
}

/// Replicas by slot, and the churn driver, shared by failover and partition.
pub(crate) struct Cluster {
    pub(crate) env: Env,
    pub(crate) replicas: Vec<Option<Ccm>>,
    pub(crate) recorder: Recorder,
    recorder_task: tokio::task::JoinHandle<()>,
    churn_task: tokio::task::JoinHandle<()>,
    churned: Arc<AtomicU32>,
}

impl Cluster {
    pub(crate) async fn start(binaries: &Binaries, seed: u64) -> anyhow::Result<Self> {
        let mut env = Env::start(binaries, Timing::SHORT, seed).await?;
        let (recorder, recorder_task) = Recorder::start(env.client.clone());
        let mut world = World::new(&env.client);
        for id in 1..=4 {
            world.add_node(id).await?;
        }
        for id in 101..=106 {
            world.create_service(id).await?;
        }
        let replicas = (0..3)
            .map(|slot| env.spawn_replica(slot).map(Some))
            .collect::<anyhow::Result<_>>()?;
        let churned = Arc::new(AtomicU32::new(0));
        let counter = churned.clone();
        let churn_task = tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut next_id = 200;
            loop {
                tokio::time::sleep(CHURN_EVERY).await;
                // The driver's own requests may fail while faults are injected.
                if world.churn(&mut rng, &mut next_id).await.is_ok() {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let cluster = Self {
            env,
            replicas,
            recorder,
            recorder_task,
            churn_task,
            churned,
        };
        cluster.wait_for_leader(None, Instant::now()).await?;
        Ok(cluster)
    }

    /// Waits until a holder other than `not` leads with a term acquired
    /// after `since`; the new holder.
    pub(crate) async fn wait_for_leader(
        &self,
        not: Option<&str>,
        since: Instant,
    ) -> anyhow::Result<lease::Record> {
        let floor_us = i64::try_from(
            (std::time::SystemTime::now() - since.elapsed())
                .duration_since(std::time::UNIX_EPOCH)?
                .as_micros(),
        )?;
        let deadline = Instant::now() + FAILOVER_WITHIN;
        loop {
            if let Some(r) = self.recorder.holder()
                && Some(r.holder.as_str()) != not
                && (not.is_none() || r.acquired_us >= floor_us)
            {
                return Ok(r);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no new leader within {FAILOVER_WITHIN:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Restarts every replica that has exited.
    pub(crate) fn respawn_exited(&mut self) -> anyhow::Result<()> {
        for slot in 0..self.replicas.len() {
            let exited = match &mut self.replicas[slot] {
                Some(replica) => replica.exited()?.is_some(),
                None => true,
            };
            if exited {
                self.replicas[slot] = Some(self.env.spawn_replica(slot)?);
            }
        }
        Ok(())
    }

    /// Stops the churn: how many changes it made.
    pub(crate) fn stop_churn(&mut self) -> u32 {
        self.churn_task.abort();
        self.churned.load(Ordering::Relaxed)
    }

    /// Judges every mutation so far against the Lease's history.
    pub(crate) async fn fencing(&self) -> anyhow::Result<lease::Fencing> {
        let calls = self.env.cloud.calls().await?;
        let terms = lease::terms(&self.recorder.records());
        Ok(lease::judge(&calls, &terms))
    }

    /// Stops the churn, waits up to `within` for convergence and judges
    /// every mutation: how many changes the churn made, how long
    /// convergence took (or the last verdict, with every log kept under
    /// `target/chaos/logs/`), and the fencing verdict.
    pub(crate) async fn finish(&mut self, within: Duration) -> anyhow::Result<Finished> {
        let changes = self.stop_churn();
        let converged = invariants::converge(&self.env.client, &self.env.cloud, within).await?;
        if converged.is_err() {
            // The replicas' and the cloud's logs, to read after the run.
            let kept = self.env.keep_logs("not-converged").await?;
            println!("  logs kept in {}", kept.display());
        }
        let fencing = self.fencing().await?;
        Ok(Finished {
            changes,
            converged,
            fencing,
        })
    }
}

/// How a [`Cluster`] ended.
pub(crate) struct Finished {
    pub(crate) changes: u32,
    pub(crate) converged: Result<Duration, invariants::Verdict>,
    pub(crate) fencing: lease::Fencing,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.recorder_task.abort();
        self.churn_task.abort();
    }
}

/// Kills or freezes the leader `rounds` times.
pub(crate) async fn run(binaries: &Binaries, rounds: u32) -> anyhow::Result<Value> {
    let mut cluster = Cluster::start(binaries, 42).await?;
    let mut failovers = Vec::new();
    let mut deposed_exits = Vec::new();
    for round in 0..rounds {
        let leader = cluster.wait_for_leader(None, Instant::now()).await?;
        let slot = slot_of(&leader.holder)
            .with_context(|| format!("which replica is {}", leader.holder))?;
        let freeze = round % 2 == 1;
        let replica = cluster.replicas[slot]
            .as_ref()
            .context("the leader's process")?;
        let start = Instant::now();
        replica.signal(if freeze { "STOP" } else { "KILL" }).await?;
        let next = cluster
            .wait_for_leader(Some(&leader.holder), start)
            .await
            .with_context(|| format!("round {round}"))?;
        failovers.push(start.elapsed());
        let replica = cluster.replicas[slot]
            .as_mut()
            .context("the leader's process")?;
        if freeze {
            replica.signal("CONT").await?;
            let resumed = Instant::now();
            replica.wait(EXIT_WITHIN).await.with_context(|| {
                format!("round {round}: the resumed, deposed leader did not exit")
            })?;
            deposed_exits.push(resumed.elapsed());
        } else {
            replica.wait(EXIT_WITHIN).await?;
        }
        cluster.respawn_exited()?;
        if round % 10 == 9 || round + 1 == rounds {
            println!(
                "  failover {}/{rounds}: {} → {} in {} ms",
                round + 1,
                leader.holder,
                next.holder,
                start.elapsed().as_millis()
            );
        }
    }
    let Finished {
        changes,
        converged,
        fencing,
    } = cluster.finish(Duration::from_secs(60)).await?;
    let figures = json!({
        "suite": "failover",
        "failovers": failovers.len(),
        "kills": failovers.len().div_ceil(2),
        "freezes": failovers.len() / 2,
        "churn_changes": changes,
        "mutations_judged": fencing.mutations,
        "unfenced": fencing.unfenced.len(),
        "overlapping": fencing.overlapping.len(),
        "unfenced_examples": fencing.unfenced.iter().chain(&fencing.overlapping).take(10).collect::<Vec<_>>(),
        "failover_ms": {
            "p50": ms(percentile(&failovers, 50.0)),
            "p99": ms(percentile(&failovers, 99.0)),
            "max": ms(percentile(&failovers, 100.0)),
        },
        "deposed_exit_ms": {
            "p50": ms(percentile(&deposed_exits, 50.0)),
            "max": ms(percentile(&deposed_exits, 100.0)),
        },
        "lease_ms": ms(Timing::SHORT.lease),
        "retry_ms": ms(Timing::SHORT.retry),
        "converged_after_ms": converged.as_ref().ok().map(|d| ms(*d)),
        "not_converged": converged.as_ref().err().map(|v| format!("{v:?}")),
        "replicas_started": cluster.env.replicas_started(),
    });
    let p99 = percentile(&failovers, 99.0);
    println!(
        "failover: {} failovers, {} mutations judged, {} unfenced, {} overlapping; failover p50 {} ms, p99 {} ms, max {} ms (goal p99 ≤ {} ms)",
        failovers.len(),
        fencing.mutations,
        fencing.unfenced.len(),
        fencing.overlapping.len(),
        ms(percentile(&failovers, 50.0)),
        ms(p99),
        ms(percentile(&failovers, 100.0)),
        ms(Timing::SHORT.lease + Timing::SHORT.retry),
    );
    let passed = fencing.unfenced.is_empty()
        && fencing.overlapping.is_empty()
        && converged.is_ok()
        && p99 <= Timing::SHORT.lease + Timing::SHORT.retry;
    let mut figures = figures;
    figures["passed"] = json!(passed);
    Ok(figures)
}
