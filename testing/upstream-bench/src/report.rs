//! A run's figures, as JSON and as the side-by-side table, and the counts
//! a run may not exceed against a baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::differences;
use crate::measure::Window;
use crate::outcome::Outcome;

/// When a run reached its milestones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Times {
    /// Every node initialized, from the CCM's start.
    pub(crate) nodes_initialized: Option<Duration>,
    /// The Service's ingress, from the Service's creation.
    pub(crate) load_balancer: Option<Duration>,
    /// Every pod CIDR routed, from the CCM's start.
    pub(crate) routes: Option<Duration>,
}

/// One binary's run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figures {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) nodes: usize,
    pub(crate) quiet_seconds: u64,
    pub(crate) times: Times,
    /// `nodes` (start to every node initialized), `busy` (to the load
    /// balancer and every route), `quiet` (the quiet window), `whole`.
    pub(crate) windows: Vec<(String, Window)>,
    pub(crate) peak_rss_mib: f64,
    pub(crate) cpu_seconds: f64,
    /// Actions the proxy answered itself, with how often.
    pub(crate) answered_here: Vec<String>,
    /// Cloud calls answered with an error, as `Action Code (n)`: what the
    /// calls that changed nothing bought.
    pub(crate) failed: Vec<String>,
    /// What the binary left behind ([`crate::outcome`]).
    pub(crate) outcome: Outcome,
}

fn seconds(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_secs_f64()))
}

fn duration(v: &Value) -> Option<Duration> {
    v.as_f64().map(Duration::from_secs_f64)
}

fn counts(v: &Value) -> anyhow::Result<BTreeMap<String, u64>> {
    v.as_object()
        .context("counts are not an object")?
        .iter()
        .map(|(k, n)| Ok((k.clone(), n.as_u64().context("a count is not a number")?)))
        .collect()
}

/// A JSON array's strings; none when absent (figures published before it).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl Figures {
    pub(crate) fn to_json(&self) -> Value {
        let windows: serde_json::Map<String, Value> = self
            .windows
            .iter()
            .map(|(name, w)| (name.clone(), json!({"cloud": w.cloud, "api": w.api})))
            .collect();
        json!({
            "name": self.name,
            "version": self.version,
            "nodes": self.nodes,
            "quiet_seconds": self.quiet_seconds,
            "seconds": {
                "nodes_initialized": seconds(self.times.nodes_initialized),
                "load_balancer": seconds(self.times.load_balancer),
                "routes": seconds(self.times.routes),
            },
            "windows": windows,
            "peak_rss_mib": self.peak_rss_mib,
            "cpu_seconds": self.cpu_seconds,
            "answered_here": self.answered_here,
            "failed": self.failed,
            "outcome": self.outcome,
        })
    }

    pub(crate) fn from_json(v: &Value) -> anyhow::Result<Self> {
        let windows = ["nodes", "busy", "quiet", "whole"]
            .iter()
            .map(|name| {
                let w = &v["windows"][*name];
                Ok((
                    (*name).to_owned(),
                    Window {
                        cloud: counts(&w["cloud"]).with_context(|| format!("window {name}"))?,
                        api: counts(&w["api"]).with_context(|| format!("window {name}"))?,
                    },
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            name: v["name"].as_str().context("no name")?.to_owned(),
            version: v["version"].as_str().unwrap_or("?").to_owned(),
            nodes: usize::try_from(v["nodes"].as_u64().context("no nodes")?)?,
            quiet_seconds: v["quiet_seconds"].as_u64().context("no quiet_seconds")?,
            times: Times {
                nodes_initialized: duration(&v["seconds"]["nodes_initialized"]),
                load_balancer: duration(&v["seconds"]["load_balancer"]),
                routes: duration(&v["seconds"]["routes"]),
            },
            windows,
            peak_rss_mib: v["peak_rss_mib"].as_f64().context("no peak_rss_mib")?,
            cpu_seconds: v["cpu_seconds"].as_f64().context("no cpu_seconds")?,
            answered_here: strings(&v["answered_here"]),
            failed: strings(&v["failed"]),
            outcome: v["outcome"]
                .as_object()
                .context("no outcome")?
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        v.as_str().context("a fact is not a string")?.to_owned(),
                    ))
                })
                .collect::<anyhow::Result<_>>()?,
        })
    }

    fn window(&self, name: &str) -> Window {
        self.windows
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, w)| w.clone())
            .unwrap_or_default()
    }
}

/// The counts held against a baseline: `(label, count)`, over the whole
/// run. The windows are reported, not held: where a window ends depends
/// on each binary's own order of work (upstream writes a node's
/// `NetworkUnavailable` before every node is initialized, ours after), so
/// the same work falls into different windows.
fn gated(f: &Figures) -> Vec<(String, u64)> {
    let w = f.window("whole");
    vec![
        ("cloud calls".to_owned(), w.cloud_calls()),
        ("API requests".to_owned(), w.api_requests()),
        ("Events created".to_owned(), w.events_created()),
        ("node status writes".to_owned(), w.node_status_writes()),
    ]
}

/// Every gated count of `run` above `baseline`'s, as a line each.
pub(crate) fn regressions(baseline: &Figures, run: &Figures) -> Vec<String> {
    if baseline.nodes != run.nodes || baseline.quiet_seconds != run.quiet_seconds {
        return vec![format!(
            "the baseline ran {} nodes with a {} s quiet window, this run {} and {} s: not comparable",
            baseline.nodes, baseline.quiet_seconds, run.nodes, run.quiet_seconds
        )];
    }
    let mut lines: Vec<String> = gated(baseline)
        .into_iter()
        .zip(gated(run))
        .filter(|((_, base), (_, ours))| ours > base)
        .map(|((label, base), (_, ours))| {
            format!(
                "{label}: {} made {ours}, {} {base}",
                run.name, baseline.name
            )
        })
        .collect();
    for difference in differences::unexplained(&baseline.outcome, &run.outcome) {
        lines.push(format!(
            "{}: {} left {}, {} {} (not a known difference: match it, or explain it in testing/upstream-bench/src/differences.rs)",
            difference.fact,
            run.name,
            difference.ours.as_deref().unwrap_or("nothing"),
            baseline.name,
            difference.upstream.as_deref().unwrap_or("nothing"),
        ));
    }
    lines
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
}

/// The side-by-side table: a column per run, and the last run over the
/// first when there are two.
pub(crate) fn table(all: &[Figures]) -> String {
    let Some(first) = all.first() else {
        return String::new();
    };
    let mut rows: Vec<(String, Vec<f64>, Vec<String>)> = Vec::new();
    let mut row = |label: String, values: Vec<Option<f64>>, shown: Vec<String>| {
        rows.push((
            label,
            values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect(),
            shown,
        ));
    };
    let n = first.nodes;
    for (label, pick) in [
        (format!("all {n} nodes initialized (from start)"), 0),
        (
            "first load balancer has an ingress (from the Service's creation)".to_owned(),
            1,
        ),
        (format!("all {n} routes created (from start)"), 2),
    ] {
        let times: Vec<Option<Duration>> = all
            .iter()
            .map(|f| {
                [
                    f.times.nodes_initialized,
                    f.times.load_balancer,
                    f.times.routes,
                ][pick]
            })
            .collect();
        row(
            label,
            times.iter().map(|t| t.map(|d| d.as_secs_f64())).collect(),
            times.iter().map(|t| secs(*t)).collect(),
        );
    }
    let count_row = |row: &mut dyn FnMut(String, Vec<Option<f64>>, Vec<String>),
                     label: String,
                     values: Vec<u64>| {
        #[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        let floats = values.iter().map(|v| Some(*v as f64)).collect();
        row(label, floats, values.iter().map(u64::to_string).collect());
    };
    for (window, title) in [
        ("whole", "whole run"),
        ("nodes", "until every node is initialized"),
        ("busy", "then until the load balancer and every route"),
        ("quiet", "quiet window"),
    ] {
        let ws: Vec<Window> = all.iter().map(|f| f.window(window)).collect();
        count_row(
            &mut row,
            format!("cloud calls, {title}"),
            ws.iter().map(Window::cloud_calls).collect(),
        );
        count_row(
            &mut row,
            format!("kube-apiserver requests, {title}"),
            ws.iter().map(Window::api_requests).collect(),
        );
        count_row(
            &mut row,
            format!("Events created, {title}"),
            ws.iter().map(Window::events_created).collect(),
        );
        count_row(
            &mut row,
            format!("node status writes, {title}"),
            ws.iter().map(Window::node_status_writes).collect(),
        );
    }
    let wholes: Vec<Window> = all.iter().map(|f| f.window("whole")).collect();
    let actions: BTreeSet<&String> = wholes.iter().flat_map(|w| w.cloud.keys()).collect();
    for action in actions {
        count_row(
            &mut row,
            format!("`{action}`, whole run"),
            wholes
                .iter()
                .map(|w| w.cloud.get(action).copied().unwrap_or(0))
                .collect(),
        );
    }
    let kinds: BTreeSet<&String> = wholes.iter().flat_map(|w| w.api.keys()).collect();
    for kind in kinds {
        count_row(
            &mut row,
            format!("API `{kind}`, whole run"),
            wholes
                .iter()
                .map(|w| w.api.get(kind).copied().unwrap_or(0))
                .collect(),
        );
    }
    row(
        "peak RSS".to_owned(),
        all.iter().map(|f| Some(f.peak_rss_mib)).collect(),
        all.iter()
            .map(|f| format!("{:.1} MiB", f.peak_rss_mib))
            .collect(),
    );
    row(
        "CPU seconds".to_owned(),
        all.iter().map(|f| Some(f.cpu_seconds)).collect(),
        all.iter()
            .map(|f| format!("{:.2}", f.cpu_seconds))
            .collect(),
    );

    let ratio = all.len() == 2;
    let mut text = String::from("| figure |");
    for f in all {
        text.push_str(&format!(" {} |", f.name));
    }
    if ratio {
        text.push_str(&format!(" {} / {} |", all[1].name, all[0].name));
    }
    text.push_str("\n|---|");
    text.push_str(&"---:|".repeat(all.len() + usize::from(ratio)));
    text.push('\n');
    for (label, values, shown) in rows {
        text.push_str(&format!("| {label} |"));
        for s in &shown {
            text.push_str(&format!(" {s} |"));
        }
        if ratio {
            let r = values[1] / values[0];
            if r.is_finite() {
                text.push_str(&format!(" {r:.2} |"));
            } else {
                text.push_str(" - |");
            }
        }
        text.push('\n');
    }
    text.push('\n');
    for f in all {
        text.push_str(&format!(
            "- {}: `{}`, {} nodes, quiet window {} s{}{}\n",
            f.name,
            f.version,
            f.nodes,
            f.quiet_seconds,
            if f.answered_here.is_empty() {
                String::new()
            } else {
                format!(
                    "; answered by the proxy as AWS answers, moto lacking them: {}",
                    f.answered_here.join(", ")
                )
            },
            if f.failed.is_empty() {
                "; every cloud call succeeded".to_owned()
            } else {
                format!(
                    "; cloud calls answered with an error: {}",
                    f.failed.join(", ")
                )
            }
        ));
    }
    if let [upstream, ours] = all {
        text.push_str(&differences::section(&upstream.outcome, &ours.outcome));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(name: &str, whole_calls: u64) -> Figures {
        let w = Window {
            cloud: BTreeMap::from([("DescribeInstances".to_owned(), whole_calls)]),
            api: BTreeMap::from([("create events".to_owned(), 2)]),
        };
        Figures {
            name: name.to_owned(),
            version: "v0".to_owned(),
            nodes: 20,
            quiet_seconds: 30,
            times: Times {
                nodes_initialized: Some(Duration::from_secs(2)),
                load_balancer: Some(Duration::from_millis(500)),
                routes: None,
            },
            windows: ["nodes", "busy", "quiet", "whole"]
                .iter()
                .map(|n| ((*n).to_owned(), w.clone()))
                .collect(),
            peak_rss_mib: 30.0,
            cpu_seconds: 1.5,
            answered_here: vec!["DescribeInstanceTopology (3)".to_owned()],
            failed: vec!["CreateRoute RouteAlreadyExists (2)".to_owned()],
            outcome: Outcome::from([("node taints".to_owned(), String::new())]),
        }
    }

    #[test]
    fn figures_survive_their_json() -> anyhow::Result<()> {
        let f = figures("upstream", 7);
        assert_eq!(Figures::from_json(&f.to_json())?, f);
        Ok(())
    }

    #[test]
    fn a_count_above_the_baseline_is_a_regression_and_equal_is_not() {
        let base = figures("upstream", 7);
        assert!(regressions(&base, &figures("ours", 7)).is_empty());
        let lines = regressions(&base, &figures("ours", 8));
        assert_eq!(lines, ["cloud calls: ours made 8, upstream 7"]);
        let mut other = figures("ours", 1);
        other.nodes = 100;
        assert_eq!(regressions(&base, &other).len(), 1);
    }

    #[test]
    fn a_difference_in_what_was_left_behind_is_a_regression_unless_explained() {
        let base = figures("upstream", 7);
        let mut ours = figures("ours", 7);
        ours.outcome.insert(
            "node taints".to_owned(),
            "node.kubernetes.io/unreachable".to_owned(),
        );
        let lines = regressions(&base, &ours);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0]
                .starts_with("node taints: ours left node.kubernetes.io/unreachable, upstream "),
            "{lines:?}"
        );
        // An explained difference (upstream's Event per node) is not one.
        let mut ours = figures("ours", 7);
        let mut base = figures("upstream", 7);
        base.outcome
            .insert("event Node Normal Synced".to_owned(), "recorded".to_owned());
        assert!(regressions(&base, &ours).is_empty());
        ours.outcome.clear();
        assert_eq!(
            regressions(&base, &ours).len(),
            1,
            "a fact gone is a difference"
        );
    }

    #[test]
    fn the_table_has_a_ratio_column_for_two_runs() {
        let text = table(&[figures("upstream", 10), figures("ours", 5)]);
        assert!(
            text.starts_with("| figure | upstream | ours | ours / upstream |"),
            "{text}"
        );
        assert!(
            text.contains("| cloud calls, whole run | 10 | 5 | 0.50 |"),
            "{text}"
        );
        assert!(
            text.contains("| all 20 routes created (from start) | - | - | - |"),
            "{text}"
        );
    }
}
