//! What a run counts: the CCM's API requests from the audit log, its cloud
//! calls from the proxy's log, and its process's peak RSS and CPU time
//! from `/proc`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use ccm_test_support::AUDITED_USER;

/// One counted thing (a cloud action, an API request kind) and when it
/// happened, from the start of the CCM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Counted {
    pub(crate) what: String,
    pub(crate) at: Duration,
}

/// The CCM's requests in the audit log at `path`, as `VERB resource[/sub]`
/// (`patch nodes/status`), with their arrival since `started`.
pub(crate) fn api_requests(path: &Path, started: SystemTime) -> anyhow::Result<Vec<Counted>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let started = jiff::Timestamp::try_from(started)?;
    let mut requests = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let event: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), n + 1))?;
        if event["user"]["username"] != AUDITED_USER {
            continue;
        }
        let Some(received) = event["requestReceivedTimestamp"].as_str() else {
            continue;
        };
        let received: jiff::Timestamp = received
            .parse()
            .with_context(|| format!("{}:{}: a bad timestamp", path.display(), n + 1))?;
        let at = Duration::try_from(received.duration_since(started)).unwrap_or_default();
        requests.push(Counted {
            what: kind(&event),
            at,
        });
    }
    Ok(requests)
}

/// `VERB resource[/subresource]` of an audit event (`get /healthz` style
/// for a non-resource URL).
fn kind(event: &serde_json::Value) -> String {
    let verb = event["verb"].as_str().unwrap_or("?");
    match event["objectRef"]["resource"].as_str() {
        Some(resource) => match event["objectRef"]["subresource"].as_str() {
            Some(sub) => format!("{verb} {resource}/{sub}"),
            None => format!("{verb} {resource}"),
        },
        None => format!(
            "{verb} {}",
            event["requestURI"]
                .as_str()
                .unwrap_or("?")
                .split('?')
                .next()
                .unwrap_or("?")
        ),
    }
}

/// A process's peak resident set and CPU time so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Usage {
    pub(crate) peak_rss_mib: f64,
    pub(crate) cpu_seconds: f64,
}

/// The usage of process `pid`, from `/proc/<pid>/status` (`VmHWM`) and
/// `/proc/<pid>/stat` (user and system time, in clock ticks of 1/100 s,
/// Linux's `USER_HZ` on every architecture it exports to user space).
pub(crate) fn usage(pid: u32) -> anyhow::Result<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/<pid>/status")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("a malformed /proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .context("a malformed /proc/<pid>/stat")
    };
    // utime and stime are fields 14 and 15: 11 and 12 after the name.
    let cpu = ticks(11)? + ticks(12)?;
    Ok(Usage {
        peak_rss_mib: hwm_kib / 1024.0,
        cpu_seconds: cpu / 100.0,
    })
}

/// What one window of a run counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) cloud: BTreeMap<String, u64>,
    pub(crate) api: BTreeMap<String, u64>,
}

impl Window {
    /// The counts of `cloud` and `api` in `[from, to)`.
    pub(crate) fn of(cloud: &[Counted], api: &[Counted], from: Duration, to: Duration) -> Self {
        let count = |all: &[Counted]| {
            let mut by = BTreeMap::new();
            for c in all.iter().filter(|c| c.at >= from && c.at < to) {
                *by.entry(c.what.clone()).or_insert(0) += 1;
            }
            by
        };
        Self {
            cloud: count(cloud),
            api: count(api),
        }
    }

    pub(crate) fn cloud_calls(&self) -> u64 {
        self.cloud.values().sum()
    }

    pub(crate) fn api_requests(&self) -> u64 {
        self.api.values().sum()
    }

    /// Events created (core or `events.k8s.io`).
    pub(crate) fn events_created(&self) -> u64 {
        self.api.get("create events").copied().unwrap_or(0)
    }

    /// Writes of a node's status (patches and updates).
    pub(crate) fn node_status_writes(&self) -> u64 {
        ["patch nodes/status", "update nodes/status"]
            .iter()
            .filter_map(|k| self.api.get(*k))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(what: &str, ms: u64) -> Counted {
        Counted {
            what: what.to_owned(),
            at: Duration::from_millis(ms),
        }
    }

    #[test]
    fn a_window_counts_what_falls_inside_it_by_kind() {
        let cloud = [
            at("DescribeInstances", 5),
            at("DescribeInstances", 10),
            at("CreateRoute", 20),
        ];
        let api = [
            at("create events", 9),
            at("patch nodes/status", 11),
            at("update nodes/status", 15),
        ];
        let w = Window::of(
            &cloud,
            &api,
            Duration::from_millis(10),
            Duration::from_millis(20),
        );
        assert_eq!(
            w.cloud,
            BTreeMap::from([("DescribeInstances".to_owned(), 1)])
        );
        assert_eq!(w.api_requests(), 2);
        assert_eq!(w.node_status_writes(), 2);
        assert_eq!(w.events_created(), 0);
    }

    #[test]
    fn audit_events_of_other_users_are_left_out_and_kinds_name_subresources() -> anyhow::Result<()>
    {
        let dir = tempfile_dir()?;
        let log = dir.join("audit.log");
        let started: SystemTime = "2026-01-01T00:00:00Z".parse::<jiff::Timestamp>()?.into();
        std::fs::write(
            &log,
            format!(
                "{}\n{}\n{}\n",
                json(
                    AUDITED_USER,
                    "patch",
                    Some(("nodes", Some("status"))),
                    "2026-01-01T00:00:01.5Z"
                ),
                json(
                    "ccm-test-admin",
                    "list",
                    Some(("nodes", None)),
                    "2026-01-01T00:00:02Z"
                ),
                json(AUDITED_USER, "get", None, "2026-01-01T00:00:03Z"),
            ),
        )?;
        let requests = api_requests(&log, started)?;
        assert_eq!(
            requests,
            [
                Counted {
                    what: "patch nodes/status".into(),
                    at: Duration::from_millis(1500)
                },
                Counted {
                    what: "get /healthz".into(),
                    at: Duration::from_secs(3)
                },
            ]
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("upstream-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    fn json(user: &str, verb: &str, object: Option<(&str, Option<&str>)>, at: &str) -> String {
        let object = object
            .map(|(resource, sub)| serde_json::json!({"resource": resource, "subresource": sub}));
        serde_json::json!({
            "user": {"username": user},
            "verb": verb,
            "objectRef": object,
            "requestURI": "/healthz",
            "requestReceivedTimestamp": at,
        })
        .to_string()
    }

    #[test]
    fn this_process_has_a_peak_rss_and_cpu_time() -> anyhow::Result<()> {
        let u = usage(std::process::id())?;
        assert!(u.peak_rss_mib > 1.0, "{u:?}");
        assert!(u.cpu_seconds >= 0.0, "{u:?}");
        Ok(())
    }
}
