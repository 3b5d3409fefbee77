//! What the benchmark reads: the CCM's `/metrics`, the test API server's
//! request log, and the CCM process's CPU time and memory from `/proc`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::{cmd, http};

/// One sample of the Prometheus text format.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A snapshot of the CCM's `/metrics`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Metrics {
    samples: Vec<Sample>,
}

/// Cloud calls by our operation name and outcome.
pub(crate) type Calls = BTreeMap<(String, String), u64>;

impl Metrics {
    pub(crate) fn read(addr: SocketAddr) -> anyhow::Result<Self> {
        let response = http::get_https(addr, "/metrics")?;
        if response.status != 200 {
            bail!("GET /metrics: HTTP {}", response.status);
        }
        Ok(Self::parse(&response.body))
    }

    fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(parse_sample)
            .collect();
        Self { samples }
    }

    /// The sum of every sample called `name` whose labels include `labels`.
    pub(crate) fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    }

    /// The CCM's live heap in MiB (`ccm_heap_allocated_bytes`, jemalloc's
    /// count of bytes in live allocations); fails when it is not exported.
    pub(crate) fn live_heap_mib(&self) -> anyhow::Result<f64> {
        let name = "ccm_heap_allocated_bytes";
        anyhow::ensure!(
            self.samples.iter().any(|s| s.name == name),
            "the CCM's /metrics has no {name}"
        );
        Ok(self.sum(name, &[]) / (1024.0 * 1024.0))
    }

    /// Controllers that report themselves running.
    pub(crate) fn running_controllers(&self) -> usize {
        self.samples
            .iter()
            .filter(|s| s.name == "ccm_controller_running" && s.value == 1.0)
            .count()
    }

    /// Nodes the cloud-node controller has initialized since it started.
    pub(crate) fn nodes_initialized(&self) -> u64 {
        self.sum(
            "node_controller_cloud_provider_taint_removal_delay_seconds_count",
            &[],
        ) as u64
    }

    /// Successful calls of one operation.
    pub(crate) fn successes(&self, operation: &str) -> u64 {
        self.sum(
            "ccm_cloud_provider_calls_total",
            &[("operation", operation), ("outcome", "success")],
        ) as u64
    }

    /// Every provider call by operation and outcome.
    pub(crate) fn calls(&self) -> Calls {
        let mut calls = Calls::new();
        for s in self
            .samples
            .iter()
            .filter(|s| s.name == "ccm_cloud_provider_calls_total")
        {
            let label = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
            *calls
                .entry((label("operation"), label("outcome")))
                .or_default() += s.value as u64;
        }
        calls
    }
}

/// The calls made between two snapshots.
pub(crate) fn calls_between(before: &Metrics, after: &Metrics) -> Calls {
    let before = before.calls();
    after
        .calls()
        .into_iter()
        .map(|(key, n)| {
            let was = before.get(&key).copied().unwrap_or(0);
            (key, n.saturating_sub(was))
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `name{a="x",b="y"} 1.5` → a sample; `None` for anything else.
fn parse_sample(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    text.split("\",")
        .filter_map(|pair| {
            let (k, v) = pair.split_once("=\"")?;
            Some((k.trim().to_owned(), v.trim_end_matches('"').to_owned()))
        })
        .collect()
}

/// The API server's request log, as `GET /testapi/requests` serves it.
#[derive(Debug)]
pub(crate) struct RequestLog {
    records: Vec<Value>,
    dropped: u64,
}

/// User agent of xtask's HTTP client: the driver's own requests.
const DRIVER_AGENT: &str = "xtask";

impl RequestLog {
    pub(crate) fn read(api: SocketAddr) -> anyhow::Result<Self> {
        let response = http::get(api, "/testapi/requests")?;
        if response.status != 200 {
            bail!("GET /testapi/requests: HTTP {}", response.status);
        }
        let mut body: Value =
            serde_json::from_str(&response.body).context("/testapi/requests: not JSON")?;
        Ok(Self {
            records: body["records"]
                .as_array_mut()
                .map(std::mem::take)
                .unwrap_or_default(),
            dropped: body["dropped"].as_u64().unwrap_or(0),
        })
    }

    /// Forgets the server's counts and request log.
    pub(crate) fn reset(api: SocketAddr) -> anyhow::Result<()> {
        let response = http::request(api, "DELETE", "/testapi/stats", None)?;
        if response.status != 200 {
            bail!("DELETE /testapi/stats: HTTP {}", response.status);
        }
        Ok(())
    }

    /// Records the log had to drop: the counts below are then incomplete.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Writes by anyone but the driver, by `resource[/subresource]`.
    pub(crate) fn ccm_writes(&self) -> BTreeMap<String, u64> {
        let mut writes = BTreeMap::new();
        for r in self.ccm_write_records() {
            let resource = r["resource"].as_str().unwrap_or_default();
            let key = match r["subresource"].as_str().unwrap_or_default() {
                "" => resource.to_owned(),
                sub => format!("{resource}/{sub}"),
            };
            *writes.entry(key).or_default() += 1;
        }
        writes
    }

    /// Node writes (`nodes` and `nodes/status`) by anyone but the driver,
    /// by node name.
    pub(crate) fn ccm_node_writes(&self) -> BTreeMap<String, u64> {
        let mut writes = BTreeMap::new();
        for r in self
            .ccm_write_records()
            .filter(|r| r["resource"] == "nodes")
        {
            let name = r["name"].as_str().unwrap_or_default().to_owned();
            *writes.entry(name).or_default() += 1;
        }
        writes
    }

    fn ccm_write_records(&self) -> impl Iterator<Item = &Value> {
        self.records.iter().filter(|r| {
            let agent = r["user_agent"].as_str().unwrap_or_default();
            let write = matches!(
                r["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            );
            write && !agent.starts_with(DRIVER_AGENT) && r["status"].as_u64() < Some(400)
        })
    }
}

/// CPU time and memory of one process.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    /// User + system CPU seconds since the process started.
    pub(crate) cpu_seconds: f64,
    /// Peak resident set (VmHWM), in KiB.
    pub(crate) peak_rss_kib: u64,
    /// Resident set now (VmRSS), in KiB.
    pub(crate) rss_kib: u64,
}

impl Usage {
    pub(crate) fn read(pid: u32) -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("reading /proc/{pid}/stat"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading /proc/{pid}/status"))?;
        let ticks = cpu_ticks(&stat).context("unexpected /proc/<pid>/stat")?;
        Ok(Self {
            cpu_seconds: ticks as f64 / clock_ticks_per_second(),
            peak_rss_kib: status_kib(&status, "VmHWM").unwrap_or(0),
            rss_kib: status_kib(&status, "VmRSS").unwrap_or(0),
        })
    }
}

/// utime + stime, in clock ticks, from the text of `/proc/<pid>/stat`.
pub(crate) fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name may contain spaces and parentheses: fields are
    // counted after its last `)`. utime and stime are fields 14 and 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The parent PID from the text of `/proc/<pid>/stat`.
pub(crate) fn parent_pid(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

pub(crate) fn clock_ticks_per_second() -> f64 {
    cmd::output("getconf", &["CLK_TCK"])
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The PID of this process's child running `binary`.
pub(crate) fn child_pid(binary: &Path) -> anyhow::Result<u32> {
    let me = std::process::id();
    let binary = binary.canonicalize()?;
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if parent_pid(&stat) == Some(me) && exe.as_deref() == Some(binary.as_path()) {
            return Ok(pid);
        }
    }
    bail!("no child process runs {}", binary.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_summed_by_label() {
        let text = "# HELP x\n\
            ccm_cloud_provider_calls_total{operation=\"list_routes\",outcome=\"success\"} 3\n\
            ccm_cloud_provider_calls_total{operation=\"list_routes\",outcome=\"throttled\"} 2\n\
            ccm_cloud_provider_calls_total{operation=\"create_route\",outcome=\"success\"} 7\n\
            node_controller_cloud_provider_taint_removal_delay_seconds_count 42\n\
            # EOF\n";
        let m = Metrics::parse(text);
        assert_eq!(
            m.sum(
                "ccm_cloud_provider_calls_total",
                &[("operation", "list_routes")]
            ),
            5.0
        );
        assert_eq!(m.successes("create_route"), 7);
        assert_eq!(m.nodes_initialized(), 42);
        assert_eq!(m.calls().len(), 3);
        assert!(m.live_heap_mib().is_err(), "no heap metric, no figure");
        let heap = Metrics::parse("ccm_heap_allocated_bytes 39845888\n# EOF\n");
        assert_eq!(heap.live_heap_mib().unwrap(), 38.0);
    }

    #[test]
    fn calls_between_snapshots_are_differences() {
        let before = Metrics::parse(
            "ccm_cloud_provider_calls_total{operation=\"list_routes\",outcome=\"success\"} 3\n",
        );
        let after = Metrics::parse(
            "ccm_cloud_provider_calls_total{operation=\"list_routes\",outcome=\"success\"} 5\n\
             ccm_cloud_provider_calls_total{operation=\"create_route\",outcome=\"success\"} 1\n",
        );
        let delta = calls_between(&before, &after);
        assert_eq!(
            delta.get(&("list_routes".to_owned(), "success".to_owned())),
            Some(&2)
        );
        assert_eq!(delta.values().sum::<u64>(), 3);
    }

    #[test]
    fn proc_stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (fake (cloud) ccm) S 4000 4242 4000 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 100 0 0";
        assert_eq!(parent_pid(stat), Some(4000));
        assert_eq!(cpu_ticks(stat), Some(325));
    }

    #[test]
    fn memory_is_read_from_proc_status() {
        let status = "Name:\tccm\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(51200));
        assert_eq!(status_kib(status, "VmRSS"), Some(40960));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }
}
