//! Crash points: a replica is killed (SIGKILL) right after the k-th cloud
//! mutation of a scenario, for each k; a new replica takes over and the
//! world must converge with nothing leaked or duplicated.

use std::time::{Duration, Instant};

use anyhow::Context;
use ccm_test_support::Ccm;
use serde_json::{Value, json};

use crate::env::{Binaries, Env, Timing};
use crate::invariants::{self, Verdict};
use crate::scenario::World;

/// How long one phase may take to converge.
const PHASE_WITHIN: Duration = Duration::from_secs(60);

/// One scenario run, with the crash handled when the trap trips.
struct Run {
    env: Env,
    world: World,
    replica: Ccm,
    /// The mutation count at which the replica was killed.
    crashed_at: Option<u64>,
}

impl Run {
    async fn start(
        binaries: &Binaries,
        seed: u64,
        crash_after: Option<u64>,
    ) -> anyhow::Result<Self> {
        let mut env = Env::start(binaries, Timing::SHORT, seed).await?;
        let world = World::new(&env.client);
        if let Some(k) = crash_after {
            env.cloud.arm(k).await?;
        }
        let replica = env.spawn_replica(0)?;
        Ok(Self {
            env,
            world,
            replica,
            crashed_at: None,
        })
    }

    /// Kills the replica when the trap has tripped, then starts another; a
    /// replica that exited by itself (a lease lost on a loaded machine ends
    /// it) is restarted as its pod would be.
    async fn tick(&mut self) -> anyhow::Result<()> {
        if self.replica.exited()?.is_some() {
            self.replica = self
                .env
                .spawn_replica(usize::from(self.crashed_at.is_some()))?;
        }
        if self.crashed_at.is_some() {
            return Ok(());
        }
        let (mutations, tripped) = self.env.cloud.trap().await?;
        if tripped {
            self.replica.signal("KILL").await?;
            self.replica.wait(Duration::from_secs(10)).await?;
            self.env.cloud.release().await?;
            self.replica = self.env.spawn_replica(1)?;
            self.crashed_at = Some(mutations);
        }
        Ok(())
    }

    /// Waits for convergence, handling the crash meanwhile: a world that
    /// looks converged while the trap has just tripped is not settled.
    async fn settle(&mut self) -> anyhow::Result<Result<Duration, Verdict>> {
        let start = Instant::now();
        loop {
            self.tick().await?;
            let before = self.crashed_at;
            let verdict = invariants::check(&self.env.client, &self.env.cloud).await?;
            self.tick().await?;
            if verdict.converged() && before == self.crashed_at {
                return Ok(Ok(start.elapsed()));
            }
            if start.elapsed() >= PHASE_WITHIN {
                return Ok(Err(verdict));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The scenario: nodes and Services created, changed and deleted in
    /// four phases, each left to converge. The final verdict.
    async fn scenario(&mut self) -> anyhow::Result<Verdict> {
        let w = &mut self.world;
        for id in 1..=10 {
            w.add_node(id).await?;
        }
        for id in 1..=20 {
            w.create_service(id).await?;
        }
        self.phase_end().await?;

        let w = &mut self.world;
        w.add_node(11).await?;
        w.add_node(12).await?;
        w.delete_node(1).await?;
        w.delete_node(2).await?;
        for id in 1..=4 {
            w.change_port(id).await?;
        }
        w.set_load_balancer(5, false).await?;
        w.set_load_balancer(6, false).await?;
        for id in 7..=9 {
            w.delete_service(id).await?;
        }
        self.phase_end().await?;

        let w = &mut self.world;
        for id in 21..=24 {
            w.create_service(id).await?;
        }
        w.delete_node(3).await?;
        w.set_load_balancer(5, true).await?;
        w.change_port(10).await?;
        w.change_port(11).await?;
        w.delete_service(12).await?;
        self.phase_end().await?;

        let w = &mut self.world;
        w.add_node(13).await?;
        w.add_node(14).await?;
        w.delete_node(4).await?;
        for id in 25..=28 {
            w.create_service(id).await?;
        }
        for id in 13..=16 {
            w.delete_service(id).await?;
        }
        Ok(match self.settle().await? {
            Ok(_) => Verdict::default(),
            Err(verdict) => verdict,
        })
    }

    /// Lets a phase converge; one that does not is reported, and the run
    /// goes on (its final verdict decides).
    async fn phase_end(&mut self) -> anyhow::Result<()> {
        if let Err(verdict) = self.settle().await? {
            println!(
                "         a phase did not converge within {PHASE_WITHIN:?} (killed after mutation {:?}): {verdict:?}",
                self.crashed_at
            );
            self.env.keep_logs("phase-not-converged").await?;
        }
        Ok(())
    }
}

/// One crash point's outcome.
struct Outcome {
    k: u64,
    crashed_at: Option<u64>,
    verdict: Verdict,
    seconds: f64,
}

async fn crash_at(binaries: &Binaries, k: Option<u64>) -> anyhow::Result<(Outcome, u64)> {
    let start = Instant::now();
    let mut run = Run::start(binaries, k.unwrap_or_default(), k).await?;
    let verdict = run.scenario().await?;
    let (mutations, _) = run.env.cloud.trap().await?;
    if !verdict.converged() {
        run.env.keep_logs("not-converged").await?;
    }
    Ok((
        Outcome {
            k: k.unwrap_or_default(),
            crashed_at: run.crashed_at,
            verdict,
            seconds: start.elapsed().as_secs_f64(),
        },
        mutations,
    ))
}

/// Runs the scenario once without a crash to count its mutations, then
/// once per crash point: every k in 1..=`points` (`quick`: `points` values
/// spread over the scenario).
pub(crate) async fn run(
    binaries: &Binaries,
    points: u64,
    quick: bool,
    only: Option<u64>,
) -> anyhow::Result<Value> {
    let (baseline, total) = crash_at(binaries, None)
        .await
        .context("the run without a crash")?;
    anyhow::ensure!(
        baseline.verdict.converged(),
        "the scenario does not converge even without a crash: {:?}",
        baseline.verdict
    );
    println!(
        "crash points: the scenario makes {total} cloud mutations without a crash ({:.1} s)",
        baseline.seconds
    );
    let ks: Vec<u64> = if let Some(k) = only {
        vec![k]
    } else if quick {
        let step = (total / points.max(1)).max(1);
        (0..points)
            .map(|i| 1 + i * step)
            .filter(|k| *k <= total)
            .collect()
    } else {
        (1..=points.min(total)).collect()
    };
    let mut outcomes = Vec::new();
    for k in ks {
        let (outcome, _) = crash_at(binaries, Some(k))
            .await
            .with_context(|| format!("crash point {k}"))?;
        println!(
            "  k={:>3}: killed after mutation {:>3}, leaked {}, duplicated {}, inconsistent {} ({:.1} s)",
            outcome.k,
            outcome.crashed_at.map_or("-".to_owned(), |m| m.to_string()),
            outcome.verdict.leaked.len(),
            outcome.verdict.duplicated.len(),
            outcome.verdict.inconsistent.len(),
            outcome.seconds
        );
        for line in outcome
            .verdict
            .leaked
            .iter()
            .chain(&outcome.verdict.duplicated)
            .chain(&outcome.verdict.inconsistent)
        {
            println!("         {line}");
        }
        outcomes.push(outcome);
    }
    let crashed = outcomes.iter().filter(|o| o.crashed_at.is_some()).count();
    let leaked: usize = outcomes.iter().map(|o| o.verdict.leaked.len()).sum();
    let duplicated: usize = outcomes.iter().map(|o| o.verdict.duplicated.len()).sum();
    let unconverged = outcomes.iter().filter(|o| !o.verdict.converged()).count();
    println!(
        "crash points: {} run, {crashed} crashed as planned, {leaked} leaked, {duplicated} duplicated, {unconverged} not converged",
        outcomes.len()
    );
    Ok(json!({
        "suite": "crash-points",
        "cloud": "fake",
        "scenario_mutations": total,
        "runs": outcomes.len(),
        "crashed": crashed,
        "leaked": leaked,
        "duplicated": duplicated,
        "not_converged": unconverged,
        "points": outcomes.iter().map(|o| json!({
            "k": o.k,
            "killed_after_mutation": o.crashed_at,
            "leaked": o.verdict.leaked,
            "duplicated": o.verdict.duplicated,
            "inconsistent": o.verdict.inconsistent,
            "seconds": o.seconds,
        })).collect::<Vec<_>>(),
        "passed": leaked == 0 && duplicated == 0 && unconverged == 0 && crashed == outcomes.len(),
    }))
}
