//! Crash points against AWS (moto): the `aws-cloud-controller-manager`
//! process is killed (SIGKILL) right after the k-th AWS call that changed
//! something, in a scenario of nodes joining and leaving and Network Load
//! Balancer Services created, changed, turned into ClusterIP Services and
//! deleted; a new process takes over, and the world must converge with no
//! load balancer, target group or security group leaked or duplicated, and
//! routes equal to the pod CIDRs.
//!
//! The trap is a proxy in front of moto ([`proxy`]): moto applies the k-th
//! mutation, the proxy holds its answer, the harness kills the CCM.
//!
//! `CHAOS_AWS_CRASH_POINTS` (default 3) says how many crash points, spread
//! evenly over the scenario's mutations, after one run without a crash that
//! counts them; `cargo xtask chaos` runs 20 or more. With `CHAOS_OUT` set,
//! the figures are also written there as JSON for the reliability report.

#![allow(
    clippy::print_stdout,
    reason = "the suite prints its figures, and a run that does not converge prints the CCM's log"
)]

use crate::support;

mod proxy;
mod verdict;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{Moto, cloud_config, ec2, elbv2, moto};
use ccm_test_support::{ApiServer, Credentials};
use k8s_openapi::api::core::v1::{Node, Service, ServicePort};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::ccm::{Ccm, launch};
use support::objects::{create_node, create_service, kubelet_node, nlb_service, nodes, services};

use proxy::Proxy;
use verdict::Verdict;

/// How many crash points, when the environment does not say.
const DEFAULT_POINTS: u64 = 3;
const POINTS_ENV: &str = "CHAOS_AWS_CRASH_POINTS";
const OUT_ENV: &str = "CHAOS_OUT";
/// How long one phase may take to converge.
const PHASE_WITHIN: Duration = Duration::from_secs(90);
/// How long a killed process may take to be reaped.
const EXIT_WITHIN: Duration = Duration::from_secs(10);
/// Instances seeded in moto; the scenario's nodes.
const INSTANCES: usize = 5;

/// One scenario run against a fresh moto, API server and CCM.
struct Run {
    /// Declared first so it is dropped first.
    ccm: Ccm,
    proxy: Proxy,
    api: ApiServer,
    client: kube::Client,
    credentials: Credentials,
    args: Vec<String>,
    estate: Estate,
    ec2: aws_sdk_ec2::Client,
    elbv2: aws_sdk_elasticloadbalancingv2::Client,
    /// Holds moto for this run (and resets it for the next).
    _moto: Moto,
    _dir: tempfile::TempDir,
    name: String,
    /// The mutation after which the process was killed.
    crashed_at: Option<u64>,
    /// Processes started so far (the first, the one after the kill, and any
    /// started because one exited by itself).
    generation: usize,
}

/// The flags of [`support::flags`] with the chaos suites' short leases, so
/// a new process leads soon after the killed one.
fn flags(config: &Path) -> Vec<String> {
    let mut args: Vec<String> = support::flags(config)
        .into_iter()
        .filter(|a| !a.starts_with("--leader-elect-"))
        .collect();
    args.extend([
        "--leader-elect-lease-duration=2s".to_owned(),
        "--leader-elect-renew-deadline=1500ms".to_owned(),
        "--leader-elect-retry-period=250ms".to_owned(),
    ]);
    args
}

impl Run {
    async fn start(crash_after: Option<u64>) -> anyhow::Result<Self> {
        let moto = moto().await;
        let ec2 = ec2(&moto);
        let elbv2 = elbv2(&moto);
        let estate = seed::estate(&ec2, INSTANCES)
            .await
            .context("seeding moto")?;
        let proxy = Proxy::start(&moto.endpoint).await?;
        if let Some(k) = crash_after {
            proxy.arm(k);
        }
        let api = ApiServer::start().await?;
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("cloud.conf");
        std::fs::write(
            &config,
            cloud_config(&moto, &format!("VPC = {}", estate.vpc))
                .replace(&moto.endpoint, &proxy.endpoint),
        )?;
        let args = flags(&config);
        let credentials = api.ccm_credentials("aws").await?;
        let name = format!("crash-{}", crash_after.unwrap_or_default());
        let ccm = launch(&format!("{name}-0"), &args)
            .credentials(&credentials)
            .start()
            .await?;
        Ok(Self {
            ccm,
            proxy,
            client: api.client(),
            api,
            credentials,
            args,
            estate,
            ec2,
            elbv2,
            _moto: moto,
            _dir: dir,
            name,
            crashed_at: None,
            generation: 1,
        })
    }

    /// Starts the next process, as a Deployment's pod is restarted.
    fn relaunch(&mut self) -> anyhow::Result<()> {
        self.ccm = launch(&format!("{}-{}", self.name, self.generation), &self.args)
            .credentials(&self.credentials)
            .spawn()?;
        self.generation += 1;
        Ok(())
    }

    /// Kills the process once the trap has tripped, then starts another; a
    /// process that exited by itself (a lease lost on a loaded machine
    /// ends it, as upstream's does) is restarted as its pod would be.
    async fn tick(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.ccm.exited()? {
            println!("         the CCM exited by itself ({status}); restarting it");
            self.relaunch()?;
        }
        if self.crashed_at.is_some() {
            return Ok(());
        }
        let (mutations, tripped) = self.proxy.trap();
        if tripped {
            self.ccm.signal("KILL").await?;
            self.ccm.wait(EXIT_WITHIN).await?;
            self.proxy.release();
            self.relaunch()?;
            self.crashed_at = Some(mutations);
        }
        Ok(())
    }

    async fn verdict(&self) -> anyhow::Result<Verdict> {
        let services: Vec<Service> = services(&self.client)
            .list(&ListParams::default())
            .await?
            .items;
        let nodes: Vec<Node> = nodes(&self.client)
            .list(&ListParams::default())
            .await?
            .items;
        verdict::check(&self.ec2, &self.elbv2, &self.estate, &services, &nodes).await
    }

    /// Waits for convergence, handling the crash meanwhile: a world that
    /// looks converged while the trap has just tripped is not settled.
    async fn settle(&mut self) -> anyhow::Result<Result<Duration, Verdict>> {
        let start = Instant::now();
        loop {
            self.tick().await?;
            let before = self.crashed_at;
            let verdict = self.verdict().await?;
            self.tick().await?;
            if verdict.converged() && before == self.crashed_at {
                return Ok(Ok(start.elapsed()));
            }
            if start.elapsed() >= PHASE_WITHIN {
                return Ok(Err(verdict));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A phase that does not converge is reported; the run goes on, and
    /// its final verdict decides.
    async fn phase_end(&mut self, phase: u32) -> anyhow::Result<()> {
        if let Err(verdict) = self.settle().await? {
            println!(
                "         phase {phase} did not converge within {PHASE_WITHIN:?} (killed after mutation {:?}): {verdict:?}\n{}",
                self.crashed_at,
                self.ccm.log_tail()
            );
        }
        Ok(())
    }

    async fn join(&self, instance: usize, pod_cidr: &str) -> anyhow::Result<()> {
        let node = kubelet_node(&self.estate.instances[instance], true, Some(pod_cidr));
        create_node(&self.client, &node).await?;
        Ok(())
    }

    async fn leave(&self, instance: usize) -> anyhow::Result<()> {
        nodes(&self.client)
            .delete(
                &self.estate.instances[instance].private_dns_name,
                &DeleteParams::default(),
            )
            .await?;
        Ok(())
    }

    async fn patch_service(&self, name: &str, patch: serde_json::Value) -> anyhow::Result<()> {
        services(&self.client)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    /// Nodes join and leave, Services come, change and go, in three phases,
    /// each left to converge. The final verdict.
    async fn scenario(&mut self) -> anyhow::Result<Verdict> {
        for (instance, cidr) in [
            (0, "10.244.1.0/24"),
            (1, "10.244.2.0/24"),
            (2, "10.244.3.0/24"),
        ] {
            self.join(instance, cidr).await?;
        }
        create_service(&self.client, &nlb_service("web-1", &[])).await?;
        create_service(&self.client, &nlb_service("web-2", &[])).await?;
        self.phase_end(1).await?;

        self.join(3, "10.244.4.0/24").await?;
        self.leave(0).await?;
        let only_8080 = ServicePort {
            name: Some("http".into()),
            port: 8080,
            protocol: Some("TCP".into()),
            ..ServicePort::default()
        };
        self.patch_service("web-1", json!({ "spec": { "ports": [only_8080] } }))
            .await?;
        create_service(&self.client, &nlb_service("web-3", &[])).await?;
        services(&self.client)
            .delete("web-2", &DeleteParams::default())
            .await?;
        self.phase_end(2).await?;

        self.patch_service(
            "web-1",
            json!({ "spec": { "type": "ClusterIP", "ports": [{ "name": "http", "port": 8080, "protocol": "TCP", "nodePort": null }] } }),
        )
        .await?;
        self.join(4, "10.244.1.0/24").await?;
        Ok(match self.settle().await? {
            Ok(_) => Verdict::default(),
            Err(verdict) => verdict,
        })
    }
}

/// One crash point's outcome.
struct Outcome {
    k: u64,
    crashed_at: Option<u64>,
    verdict: Verdict,
    seconds: f64,
}

/// Runs the scenario once, killing the process after mutation `k` if any;
/// the outcome and the mutations moto applied in all.
async fn crash_at(k: Option<u64>) -> anyhow::Result<(Outcome, u64)> {
    let start = Instant::now();
    let mut run = Run::start(k).await?;
    let verdict = run.scenario().await?;
    if !verdict.converged() {
        println!("{}", run.ccm.log_tail());
    }
    let (mutations, _) = run.proxy.trap();
    drop(run.api);
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

fn points() -> anyhow::Result<u64> {
    match std::env::var(POINTS_ENV) {
        Err(_) => Ok(DEFAULT_POINTS),
        Ok(value) => value
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .with_context(|| format!("{POINTS_ENV}={value:?} is not a count from 1 to 1000")),
    }
}

/// `points` crash points spread evenly over `1..=total`, all of them when
/// there are fewer mutations than points.
fn spread(points: u64, total: u64) -> Vec<u64> {
    if points >= total {
        return (1..=total).collect();
    }
    (0..points).map(|i| 1 + i * total / points).collect()
}

#[test]
fn crash_points_are_spread_over_the_scenario_and_never_past_its_end() {
    assert_eq!(spread(3, 60), [1, 21, 41]);
    assert_eq!(spread(20, 10), (1..=10).collect::<Vec<_>>());
    let many = spread(20, 57);
    assert_eq!(many.len(), 20);
    assert!(many.windows(2).all(|w| w[0] < w[1]) && many[19] <= 57);
}

#[tokio::test]
async fn killed_right_after_any_aws_mutation_the_ccm_converges_with_nothing_leaked()
-> anyhow::Result<()> {
    let points = points()?;
    let started = Instant::now();
    let (baseline, total) = crash_at(None).await.context("the run without a crash")?;
    assert!(
        baseline.verdict.converged(),
        "the scenario does not converge even without a crash: {:?}",
        baseline.verdict
    );
    println!(
        "AWS crash points: the scenario makes {total} AWS mutations without a crash ({:.1} s)",
        baseline.seconds
    );
    let mut outcomes = Vec::new();
    for k in spread(points, total) {
        let (outcome, _) = crash_at(Some(k))
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
        for line in outcome.verdict.lines() {
            println!("         {line}");
        }
        outcomes.push(outcome);
    }
    let crashed = outcomes.iter().filter(|o| o.crashed_at.is_some()).count();
    let leaked: usize = outcomes.iter().map(|o| o.verdict.leaked.len()).sum();
    let duplicated: usize = outcomes.iter().map(|o| o.verdict.duplicated.len()).sum();
    let unconverged = outcomes.iter().filter(|o| !o.verdict.converged()).count();
    println!(
        "AWS crash points: {} run, {crashed} crashed as planned, {leaked} leaked, {duplicated} duplicated, {unconverged} not converged ({:.0} s)",
        outcomes.len(),
        started.elapsed().as_secs_f64()
    );
    let passed = leaked == 0 && duplicated == 0 && unconverged == 0 && crashed == outcomes.len();
    if let Ok(out) = std::env::var(OUT_ENV) {
        let figures = json!({
            "suite": "crash-points",
            "cloud": "aws",
            "quick": points < 20,
            "scenario_mutations": total,
            "runs": outcomes.len(),
            "crashed": crashed,
            "leaked": leaked,
            "duplicated": duplicated,
            "not_converged": unconverged,
            "seconds": started.elapsed().as_secs_f64(),
            "points": outcomes.iter().map(|o| json!({
                "k": o.k,
                "killed_after_mutation": o.crashed_at,
                "leaked": o.verdict.leaked,
                "duplicated": o.verdict.duplicated,
                "inconsistent": o.verdict.inconsistent,
                "seconds": o.seconds,
            })).collect::<Vec<_>>(),
            "passed": passed,
        });
        std::fs::write(&out, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {out}"))?;
    }
    assert!(
        passed,
        "{crashed} of {} crashed as planned, {leaked} leaked, {duplicated} duplicated, {unconverged} not converged",
        outcomes.len()
    );
    Ok(())
}
