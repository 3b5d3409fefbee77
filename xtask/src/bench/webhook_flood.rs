//! `--only webhook-flood`: the admission webhook under a flood while the
//! CCM leads. One client sends 4 MiB reviews (above kube-apiserver's 3 MiB
//! limit, so the webhook must refuse them) on 64 connections at once for
//! the run, while one keep-alive connection posts the real mix of reviews
//! at 20 per second, open loop, as kube-apiserver would. Figures: the
//! CCM's peak resident memory, the legitimate reviews' latency (a failed
//! one counts as infinitely slow), whether the Lease was kept, and what the
//! flood got back (413, 429, cut off). A missed target fails the run.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::admission;
use super::harness::{Binaries, Cluster, KubeApiQps};
use super::measurements::{Metrics, Usage};
use crate::http;

/// Connections the flood keeps busy at once.
const FLOOD_CONNECTIONS: usize = 64;
/// The size of each flooding review.
const FLOOD_BODY: usize = 4 * 1024 * 1024;
/// Legitimate reviews per second.
const LEGIT_RATE: u32 = 20;
/// The chart's memory limit, and the peak the CCM must stay under: three
/// quarters of it, so there is room.
const CHART_LIMIT_MIB: f64 = 256.0;
const PEAK_RSS_TARGET_MIB: f64 = 192.0;
/// The p99 latency legitimate reviews must keep.
const P99_TARGET: Duration = Duration::from_millis(50);

/// What the flood got back.
#[derive(Debug, Default)]
struct Outcomes {
    too_large: AtomicU64,
    shed: AtomicU64,
    answered: AtomicU64,
    other: AtomicU64,
    cut_off: AtomicU64,
    connect_failed: AtomicU64,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    seconds: f64,
    rss_before_mib: f64,
    peak_rss_mib: f64,
    baseline_p50: Duration,
    baseline_p99: Duration,
    load_average: String,
    legit_sent: usize,
    legit_failed: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    lease_kept: bool,
    too_large: u64,
    shed: u64,
    answered: u64,
    other: u64,
    cut_off: u64,
    connect_failed: u64,
}

impl Figures {
    pub(crate) fn met(&self) -> bool {
        self.peak_rss_mib < PEAK_RSS_TARGET_MIB
            && self.p99 <= P99_TARGET
            && self.lease_kept
            && self.answered == 0
    }

    pub(crate) fn markdown(&self) -> String {
        let ms = |d: Duration| {
            if d == Duration::MAX {
                "failed".to_owned()
            } else {
                format!("{:.1} ms", d.as_secs_f64() * 1000.0)
            }
        };
        let verdict = |ok: bool| if ok { "met" } else { "NOT MET" };
        format!(
            "## Admission webhook flood\n\n\
             The release fake-cloud-controller-manager leads and serves `service-annotations`; \
             one client posts {FLOOD_BODY}-byte reviews on {FLOOD_CONNECTIONS} connections at once \
             for {:.0} s, while one keep-alive connection posts the real mix at {LEGIT_RATE}/s.\n\n\
             | figure | value |\n|---|---|\n\
             | CCM resident memory | {:.1} MiB before, peak {:.1} MiB (target < {PEAK_RSS_TARGET_MIB:.0} MiB of the chart's {CHART_LIMIT_MIB:.0}Mi: {}) |\n\
             | machine load average (1, 5, 15 min) at the start | {} |\n\
             | legitimate latency before the flood (10 s) | p50 {}, p99 {} |\n\
             | legitimate reviews | {} sent, {} failed |\n\
             | legitimate latency p50 | {} |\n\
             | legitimate latency p99 | {} (target ≤ {}: {}) |\n\
             | legitimate latency max | {} |\n\
             | Lease kept | {} |\n\
             | flood: 413 | {} |\n\
             | flood: 429 | {} |\n\
             | flood: answered 200 (must be 0) | {} |\n\
             | flood: other status | {} |\n\
             | flood: cut off before a status was read | {} |\n\
             | flood: connections refused | {} |\n",
            self.seconds,
            self.rss_before_mib,
            self.peak_rss_mib,
            verdict(self.peak_rss_mib < PEAK_RSS_TARGET_MIB),
            self.load_average,
            ms(self.baseline_p50),
            ms(self.baseline_p99),
            self.legit_sent,
            self.legit_failed,
            ms(self.p50),
            ms(self.p99),
            ms(P99_TARGET),
            verdict(self.p99 <= P99_TARGET),
            ms(self.max),
            if self.lease_kept { "yes" } else { "NO" },
            self.too_large,
            self.shed,
            self.answered,
            self.other,
            self.cut_off,
            self.connect_failed,
        )
    }
}

/// Runs the flood for `seconds` in `dir` and returns the figures.
pub(crate) fn run(binaries: &Binaries, dir: &Path, seconds: u32) -> anyhow::Result<Figures> {
    let mut cluster = Cluster::start(dir, binaries, 0)?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    // Started, so leading: the harness waits for its controllers.
    let ccm = cluster.start_ccm_with(
        KubeApiQps::Default,
        Some("service"),
        &[
            "--webhooks=service-annotations".to_owned(),
            "--webhook-bind-address=127.0.0.1".to_owned(),
            format!("--webhook-secure-port={port}"),
        ],
    )?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let bodies = admission::bodies()?;
    let mut stream = http::connect_https(addr)?;
    for body in bodies.iter().cycle().take(100) {
        admission::post(&mut stream, addr, body)?;
    }
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_default();
    // The same reviews for 10 s without the flood: what this machine gives
    // at the moment, to read the flood's figures against.
    let mut baseline = legit(
        &mut stream,
        addr,
        &bodies,
        Instant::now() + Duration::from_secs(10),
    )?
    .0;
    baseline.sort_unstable();
    let before = Usage::read(ccm.pid)?;
    let outcomes = Arc::new(Outcomes::default());
    let start = Instant::now();
    let end = start + Duration::from_secs(u64::from(seconds));
    let flooders: Vec<_> = (0..FLOOD_CONNECTIONS)
        .map(|_| {
            let outcomes = outcomes.clone();
            std::thread::spawn(move || flood(addr, end, &outcomes))
        })
        .collect();
    let (mut latencies, failed) = legit(&mut stream, addr, &bodies, end)?;
    for flooder in flooders {
        flooder
            .join()
            .map_err(|_| anyhow::anyhow!("a flooding thread panicked"))?;
    }
    let elapsed = start.elapsed();
    let after = Usage::read(ccm.pid)?;
    cluster.check_alive()?;
    let log = std::fs::read_to_string(dir.join("ccm.log")).unwrap_or_default();
    let lease_kept =
        !log.contains("lost leadership") && Metrics::read(ccm.metrics)?.running_controllers() >= 1;
    cluster.stop_ccm()?;
    latencies.sort_unstable();
    let quantile = |sorted: &[Duration], q: f64| {
        sorted[((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1))]
    };
    let at = |q: f64| quantile(&latencies, q);
    let count = |n: &AtomicU64| n.load(Ordering::Relaxed);
    Ok(Figures {
        seconds: elapsed.as_secs_f64(),
        rss_before_mib: before.rss_kib as f64 / 1024.0,
        peak_rss_mib: after.peak_rss_kib as f64 / 1024.0,
        baseline_p50: quantile(&baseline, 0.50),
        baseline_p99: quantile(&baseline, 0.99),
        load_average,
        legit_sent: latencies.len(),
        legit_failed: failed,
        p50: at(0.50),
        p99: at(0.99),
        max: *latencies.last().context("no legitimate review sent")?,
        lease_kept,
        too_large: count(&outcomes.too_large),
        shed: count(&outcomes.shed),
        answered: count(&outcomes.answered),
        other: count(&outcomes.other),
        cut_off: count(&outcomes.cut_off),
        connect_failed: count(&outcomes.connect_failed),
    })
}

/// The review mix at [`LEGIT_RATE`], open loop, until `end`: each
/// latency (a failed review's is `Duration::MAX`, and the connection is
/// made again) and how many failed.
fn legit(
    stream: &mut rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
    addr: SocketAddr,
    bodies: &[String],
    end: Instant,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let start = Instant::now();
    let interval = Duration::from_secs(1) / LEGIT_RATE;
    let mut latencies = Vec::new();
    let mut failed = 0;
    for (i, body) in bodies.iter().cycle().enumerate() {
        let due = start + interval * u32::try_from(i)?;
        if due >= end {
            break;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        match admission::post(stream, addr, body) {
            Ok(_) => latencies.push(sent.elapsed()),
            Err(_) => {
                failed += 1;
                latencies.push(Duration::MAX);
                *stream = http::connect_https(addr)?;
            }
        }
    }
    Ok((latencies, failed))
}

/// One flooding connection after another until `end`: each posts a
/// 4 MiB review as fast as the server takes it, then reads the status.
fn flood(addr: SocketAddr, end: Instant, outcomes: &Outcomes) {
    let head = format!(
        "POST /validate-service?timeout=10s HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {FLOOD_BODY}\r\n\r\n"
    );
    let chunk = vec![b' '; 64 * 1024];
    while Instant::now() < end {
        let Ok(mut stream) = http::connect_https(addr) else {
            outcomes.connect_failed.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.sock.set_write_timeout(Some(Duration::from_secs(5)));
        let _ = stream.sock.set_read_timeout(Some(Duration::from_secs(5)));
        let mut sent = stream.write_all(head.as_bytes()).is_ok();
        let mut written = 0;
        while sent && written < FLOOD_BODY {
            sent = stream.write_all(&chunk).is_ok();
            written += chunk.len();
        }
        let _ = stream.flush();
        let mut status = String::new();
        let read = BufReader::new(&mut stream).read_line(&mut status);
        let counter = match (read, status.split_whitespace().nth(1)) {
            (Ok(_), Some("413")) => &outcomes.too_large,
            (Ok(_), Some("429")) => &outcomes.shed,
            (Ok(_), Some("200")) => &outcomes.answered,
            (Ok(_), Some(_)) => &outcomes.other,
            _ => &outcomes.cut_off,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
