//! `cargo bench -p ccm-test-apiserver`: request throughput and latency of simple
//! GET and PATCH requests over loopback, with 10,000 nodes and 2,000
//! services loaded and 50 watches open and drained. It prints figures; it
//! asserts nothing about them (targets: ≥ 2,000 requests/s, p99 ≤ 5 ms on a
//! 2-core machine).
//!
//! `BENCH_SECONDS` sets each phase's length (default 5).

#![allow(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use ccm_test_apiserver::{TestApiServer, Verb};
use http_body_util::BodyExt;

const NODES: usize = 10_000;
const SERVICES: usize = 2_000;
const WATCHES: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Patch,
    Mixed,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::Get => "GET node",
            Self::Patch => "PATCH node (merge)",
            Self::Mixed => "GET+PATCH 1:1",
        }
    }
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let started = Instant::now();
    let server = TestApiServer::builder()
        .seed_nodes(NODES)
        .seed_services(SERVICES)
        .start()
        .await?;
    println!(
        "test-apiserver throughput: {NODES} nodes and {SERVICES} services seeded in {:.2?}",
        started.elapsed()
    );

    let watched = Arc::new(Watched::default());
    let from = server.resource_version().to_string();
    for i in 0..WATCHES {
        let path = if i.is_multiple_of(2) {
            "/api/v1/nodes"
        } else {
            "/api/v1/services"
        };
        drain(server.client(), path, from.clone(), watched.clone());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.stats().open_watches < WATCHES {
        anyhow::ensure!(Instant::now() < deadline, "the watches did not open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "{WATCHES} watches open ({} on nodes, {} on services), each phase {seconds}s\n",
        WATCHES / 2,
        WATCHES / 2
    );
    println!(
        "{:<20} {:>11} {:>9} {:>11} {:>9} {:>9} {:>9}",
        "phase", "concurrency", "requests", "requests/s", "p50 ms", "p99 ms", "max ms"
    );

    let phases = [
        (Op::Get, 1),
        (Op::Get, 4),
        (Op::Patch, 1),
        (Op::Patch, 4),
        (Op::Mixed, 4),
        (Op::Mixed, 16),
    ];
    for (number, (op, concurrency)) in phases.into_iter().enumerate() {
        let before = watched.events.load(Ordering::Relaxed);
        let cut_before = watched.cut.load(Ordering::Relaxed);
        let result = phase(
            &server,
            number,
            op,
            concurrency,
            Duration::from_secs(seconds),
        )
        .await?;
        let mut latencies = result.latencies;
        latencies.sort_unstable();
        let n = latencies.len();
        let at = |q: f64| {
            latencies
                .get(((n as f64 * q) as usize).min(n.saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        };
        println!(
            "{:<20} {:>11} {:>9} {:>11.0} {:>9.2} {:>9.2} {:>9.2}",
            op.name(),
            concurrency,
            n,
            n as f64 / result.elapsed.as_secs_f64(),
            ms(at(0.50)),
            ms(at(0.99)),
            ms(latencies.last().copied().unwrap_or_default()),
        );
        if op != Op::Get {
            // Every patch is one event on each node watch; wait (bounded)
            // until all are delivered, and say how long the last took.
            let expected = result.patches * (WATCHES as u64 / 2);
            let waiting = Instant::now();
            while watched.events.load(Ordering::Relaxed) - before < expected
                && watched.cut.load(Ordering::Relaxed) == cut_before
                && waiting.elapsed() < Duration::from_secs(30)
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let delivered = watched.events.load(Ordering::Relaxed) - before;
            let cut = watched.cut.load(Ordering::Relaxed) - cut_before;
            println!(
                "{:<20} watch events: {delivered} of {expected} delivered, the last {:.0} ms after the phase; \
                 {cut} watches cut for falling more than the history behind",
                "",
                ms(waiting.elapsed())
            );
        }
        anyhow::ensure!(result.failures == 0, "{} requests failed", result.failures);
    }
    let stats = server.stats();
    println!(
        "\nserver counted {} GET and {} PATCH on nodes; {} watches open",
        stats.count(Verb::Get, "nodes"),
        stats.count(Verb::Patch, "nodes"),
        stats.open_watches
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What the draining watches saw.
#[derive(Debug, Default)]
struct Watched {
    /// Watch event lines received.
    events: AtomicU64,
    /// Watches the server ended with a 410 `ERROR` event because they fell
    /// further behind than the history it keeps; they watch again from now.
    cut: AtomicU64,
}

/// Counts every event of a watch of `path` from `from`. The events are
/// counted by line, not decoded: the figures are the server's, and decoding
/// 25 copies of every change would spend the client's share of the cores.
fn drain(client: kube::Client, path: &'static str, from: String, watched: Arc<Watched>) {
    tokio::spawn(async move {
        let mut start = format!("resourceVersion={from}");
        loop {
            let uri = format!("{path}?watch=true&timeoutSeconds=3600&{start}");
            let Ok(request) = http::Request::get(uri).body(kube::client::Body::empty()) else {
                return;
            };
            let Ok(response) = client.send(request).await else {
                return;
            };
            let mut body = response.into_body();
            let mut cut = false;
            while let Some(Ok(frame)) = body.frame().await {
                if let Some(data) = frame.data_ref() {
                    let lines = data.iter().filter(|b| **b == b'\n').count() as u64;
                    let errors = data
                        .windows(16)
                        .filter(|w| *w == b"{\"type\":\"ERROR\"")
                        .count() as u64;
                    watched.events.fetch_add(lines - errors, Ordering::Relaxed);
                    cut |= errors > 0;
                }
            }
            if !cut {
                return;
            }
            watched.cut.fetch_add(1, Ordering::Relaxed);
            // From the newest state, without replaying it.
            start = "sendInitialEvents=false&resourceVersionMatch=NotOlderThan".to_owned();
        }
    });
}

struct PhaseResult {
    latencies: Vec<Duration>,
    elapsed: Duration,
    patches: u64,
    failures: u64,
}

/// Runs `concurrency` workers doing `op` for `length`. Every patch writes
/// a value no other patch wrote (phase, worker, count), so none is a no-op
/// that the server would not announce.
async fn phase(
    server: &TestApiServer,
    number: usize,
    op: Op,
    concurrency: usize,
    length: Duration,
) -> anyhow::Result<PhaseResult> {
    let started = Instant::now();
    let deadline = started + length;
    let mut workers = Vec::new();
    for worker in 0..concurrency {
        let client = server.client();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let (mut patches, mut failures) = (0u64, 0u64);
            let mut k: u64 = 0;
            while Instant::now() < deadline {
                k += 1;
                let node = (worker as u64 * 7919 + k * 104_729) % NODES as u64 + 1;
                let path = format!("/api/v1/nodes/node-{node}");
                let patch = match op {
                    Op::Get => false,
                    Op::Patch => true,
                    Op::Mixed => k.is_multiple_of(2),
                };
                let request = if patch {
                    patches += 1;
                    let body = format!(
                        r#"{{"metadata":{{"annotations":{{"bench":"{number}-{worker}-{k}"}}}}}}"#
                    );
                    http::Request::patch(path)
                        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
                        .body(kube::client::Body::from(body.into_bytes()))?
                } else {
                    http::Request::get(path).body(kube::client::Body::empty())?
                };
                let sent = Instant::now();
                let response = client.send(request).await?;
                let ok = response.status().is_success();
                response
                    .into_body()
                    .collect()
                    .await
                    .context("reading the body")?;
                latencies.push(sent.elapsed());
                if !ok {
                    failures += 1;
                }
            }
            Ok::<_, anyhow::Error>((latencies, patches, failures))
        }));
    }
    let mut result = PhaseResult {
        latencies: Vec::new(),
        elapsed: Duration::ZERO,
        patches: 0,
        failures: 0,
    };
    for worker in workers {
        let (latencies, patches, failures) = worker.await??;
        result.latencies.extend(latencies);
        result.patches += patches;
        result.failures += failures;
    }
    result.elapsed = started.elapsed();
    Ok(result)
}
