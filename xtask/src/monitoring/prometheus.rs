//! A Prometheus server of our own on loopback, and the two HTTP API reads
//! the run makes of it: instant queries and the active alerts.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::http;
use crate::processes::Processes;

/// How often Prometheus scrapes and evaluates the rules in the run.
pub(crate) const INTERVAL: Duration = Duration::from_secs(2);

/// The scrape job's name, which the rules select by.
pub(crate) const JOB: &str = "ccm";

/// Writes the config (one job scraping `target`'s `/metrics` over HTTPS
/// with the bearer token in `token_file`, the rules in `rules`) and starts
/// Prometheus with its data in `dir`; returns its address once ready.
pub(crate) fn start(
    processes: &mut Processes,
    dir: &Path,
    target: SocketAddr,
    token_file: &Path,
    rules: &Path,
) -> anyhow::Result<SocketAddr> {
    let interval = format!("{}s", INTERVAL.as_secs());
    let config = serde_json::json!({
        "global": { "scrape_interval": interval, "evaluation_interval": interval },
        "rule_files": [rules],
        "scrape_configs": [{
            "job_name": JOB,
            "scheme": "https",
            "metrics_path": "/metrics",
            // The CCM's serving certificate is self-signed, as in the
            // chart without tls.secretName.
            "tls_config": { "insecure_skip_verify": true },
            "authorization": { "type": "Bearer", "credentials_file": token_file },
            "static_configs": [{ "targets": [target.to_string()] }],
        }],
    });
    let config_file = dir.join("prometheus.json");
    std::fs::write(&config_file, serde_json::to_vec_pretty(&config)?)?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    processes.start(
        "prometheus",
        Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .arg("--log.level=warn"),
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        processes.check_alive()?;
        if http::get(address, "/-/ready").is_ok_and(|r| r.status == 200) {
            return Ok(address);
        }
        if Instant::now() > deadline {
            bail!(
                "Prometheus not ready after a minute; see its log in {}",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The `data` of a successful API answer.
fn data(address: SocketAddr, path: &str) -> anyhow::Result<Value> {
    let response = http::get(address, path)?;
    let body: Value = serde_json::from_str(&response.body)
        .with_context(|| format!("GET {path}: not JSON: {}", response.body))?;
    if response.status != 200 || body["status"] != "success" {
        bail!("GET {path}: HTTP {}: {}", response.status, response.body);
    }
    Ok(body["data"].clone())
}

/// The series an instant query returns.
pub(crate) fn query(address: SocketAddr, promql: &str) -> anyhow::Result<Vec<Value>> {
    let data = data(address, &format!("/api/v1/query?query={}", encode(promql)))?;
    Ok(data["result"].as_array().cloned().unwrap_or_default())
}

/// One active alert.
#[derive(Debug, Clone)]
pub(crate) struct Alert {
    pub(crate) name: String,
    /// `pending` or `firing`.
    pub(crate) state: String,
    pub(crate) labels: Value,
}

/// The alerts that are pending or firing now.
pub(crate) fn alerts(address: SocketAddr) -> anyhow::Result<Vec<Alert>> {
    let data = data(address, "/api/v1/alerts")?;
    Ok(data["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|alert| Alert {
            name: alert["labels"]["alertname"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            state: alert["state"].as_str().unwrap_or_default().to_owned(),
            labels: alert["labels"].clone(),
        })
        .collect())
}

/// Percent-encodes a query parameter (RFC 3986: all but the unreserved).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode("sum by (x) (m{job=~\"a|b\"}[5m])"),
            "sum%20by%20%28x%29%20%28m%7Bjob%3D~%22a%7Cb%22%7D%5B5m%5D%29"
        );
    }
}
