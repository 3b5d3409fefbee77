//! The admission webhook under load: the release CCM serves
//! `service-annotations` over HTTPS and one keep-alive connection posts
//! AdmissionReviews at a fixed rate (open loop: each is sent at its
//! scheduled time, or at once when the previous answer came late), as
//! kube-apiserver would. Figures: latency per review (p50, p99, max), the
//! CCM's CPU and its resident memory before and after.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::harness::{Binaries, Cluster, KubeApiQps};
use super::measurements::Usage;
use crate::http;

/// Reviews per second, the figure.
pub(crate) const RATE: u32 = 500;
/// The p99 latency the webhook must stay under.
const P99_TARGET: Duration = Duration::from_millis(2);

/// What one run measured.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    pub(crate) reviews: usize,
    pub(crate) seconds: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) max: Duration,
    pub(crate) refused: usize,
    pub(crate) cpu_seconds: f64,
    pub(crate) rss_before_kib: u64,
    pub(crate) rss_after_kib: u64,
    pub(crate) peak_rss_kib: u64,
}

impl Figures {
    pub(crate) fn met(&self) -> bool {
        self.p99 <= P99_TARGET
    }

    pub(crate) fn markdown(&self) -> String {
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
        format!(
            "## Admission webhook\n\n\
             The release fake-cloud-controller-manager serves `service-annotations` over HTTPS \
             (a self-signed certificate made in memory); one keep-alive connection posts \
             AdmissionReviews at {RATE} per second, open loop, a mix of four: a valid \
             LoadBalancer Service with three annotations, one with a malformed health-check interval (refused), \
             a ClusterIP Service, and an update carrying the old object.\n\n\
             | figure | value |\n|---|---|\n\
             | reviews | {} in {:.1} s ({:.0}/s) |\n\
             | refused | {} |\n\
             | latency p50 | {} |\n\
             | latency p99 | {} (target ≤ {}: {}) |\n\
             | latency max | {} |\n\
             | CCM CPU during the run | {:.2} s ({:.1}% of one core) |\n\
             | CCM resident memory | {:.1} MiB before, {:.1} MiB after, peak {:.1} MiB |\n",
            self.reviews,
            self.seconds,
            self.reviews as f64 / self.seconds,
            self.refused,
            ms(self.p50),
            ms(self.p99),
            ms(P99_TARGET),
            if self.met() { "met" } else { "NOT MET" },
            ms(self.max),
            self.cpu_seconds,
            100.0 * self.cpu_seconds / self.seconds,
            self.rss_before_kib as f64 / 1024.0,
            self.rss_after_kib as f64 / 1024.0,
            self.peak_rss_kib as f64 / 1024.0,
        )
    }
}

/// Runs the load for `seconds` in `dir` and returns the figures.
pub(crate) fn run(binaries: &Binaries, dir: &Path, seconds: u32) -> anyhow::Result<Figures> {
    let mut cluster = Cluster::start(dir, binaries, 0)?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
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
    let bodies = bodies()?;
    let mut stream = http::connect_https(addr)?;
    // Warm up: the connection, the allocator, the caches.
    for body in bodies.iter().cycle().take(200) {
        post(&mut stream, addr, body)?;
    }
    let before = Usage::read(ccm.pid)?;
    let total = (RATE * seconds) as usize;
    let interval = Duration::from_secs(1) / RATE;
    let mut latencies = Vec::with_capacity(total);
    let mut refused = 0;
    let start = Instant::now();
    for (i, body) in bodies.iter().cycle().take(total).enumerate() {
        let due = start + interval * u32::try_from(i)?;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        let answer = post(&mut stream, addr, body)?;
        latencies.push(sent.elapsed());
        if answer["response"]["allowed"] == false {
            refused += 1;
        }
    }
    let elapsed = start.elapsed();
    let after = Usage::read(ccm.pid)?;
    cluster.stop_ccm()?;
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Ok(Figures {
        reviews: latencies.len(),
        seconds: elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        max: *latencies.last().context("no review sent")?,
        refused,
        cpu_seconds: after.cpu_seconds - before.cpu_seconds,
        rss_before_kib: before.rss_kib,
        rss_after_kib: after.rss_kib,
        peak_rss_kib: after.peak_rss_kib,
    })
}

/// One review over the kept connection; the decoded answer.
pub(super) fn post<S: Read + Write>(
    stream: &mut S,
    addr: SocketAddr,
    body: &str,
) -> anyhow::Result<Value> {
    let head = format!(
        "POST /validate-service?timeout=2s HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    ensure!(
        status.starts_with("HTTP/1.1 200"),
        "the webhook answered {}",
        status.trim()
    );
    let mut length = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = Some(value.trim().parse::<usize>()?);
        }
    }
    let Some(length) = length else {
        bail!("the webhook's answer has no Content-Length")
    };
    let mut answer = vec![0; length];
    reader.read_exact(&mut answer)?;
    ensure!(
        reader.buffer().is_empty(),
        "the webhook sent more than one answer"
    );
    Ok(serde_json::from_slice(&answer)?)
}

/// The mix of reviews, as JSON.
pub(super) fn bodies() -> anyhow::Result<Vec<String>> {
    let service = |type_: &str, annotations: Value| {
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "uid": "2b5c9e44-1d6f-4a55-9e0b-6a0f0a6b7c11",
                         "annotations": annotations, "labels": {"app": "web"}},
            "spec": {"type": type_, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"},
                                               {"port": 443, "targetPort": 8443, "protocol": "TCP"}],
                     "selector": {"app": "web"}},
        })
    };
    let good = json!({
        "service.beta.kubernetes.io/fake-load-balancer-type": "nlb",
        "service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval": "10",
        "service.beta.kubernetes.io/fake-load-balancer-hostname": "web.example.com",
    });
    let malformed =
        json!({"service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval": "1"});
    let review = |operation: &str, object: Value, old: Value| {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "0f6b9c1e-3b0a-4c1e-9d55-1b2c3d4e5f60",
                "kind": {"group": "", "version": "v1", "kind": "Service"},
                "resource": {"group": "", "version": "v1", "resource": "services"},
                "name": "web", "namespace": "default", "operation": operation,
                "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
                "object": object, "oldObject": old, "dryRun": false,
            }
        })
        .to_string()
    };
    Ok(vec![
        review("CREATE", service("LoadBalancer", good.clone()), Value::Null),
        review("CREATE", service("LoadBalancer", malformed), Value::Null),
        review("CREATE", service("ClusterIP", json!({})), Value::Null),
        review(
            "UPDATE",
            service("LoadBalancer", good.clone()),
            service("LoadBalancer", good),
        ),
    ])
}
