//! The scenarios and what each reports: figures, cloud calls set against
//! upstream's algorithm, and the targets they are held to.

pub(crate) mod burst;
pub(crate) mod established;
pub(crate) mod routes;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::KubeApiQps;
use super::measurements::{Calls, RequestLog};
use super::upstream::Model;

/// How big the scenarios are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub(crate) name: &'static str,
    /// Node bursts at upstream's default `--kube-api-qps`.
    pub(crate) default_qps_bursts: &'static [usize],
    /// Node bursts with the QPS raised.
    pub(crate) raised_qps_bursts: &'static [usize],
    /// Nodes of the established cluster.
    pub(crate) nodes: usize,
    /// Nodes of the route burst.
    pub(crate) route_nodes: usize,
    /// LoadBalancer Services of the established cluster.
    pub(crate) services: usize,
    pub(crate) steady_window: Duration,
    /// Heartbeat rounds, one every [`HEARTBEAT_PERIOD`].
    pub(crate) heartbeat_rounds: u32,
    /// Seconds of admission reviews at 500/s.
    pub(crate) admission_seconds: u32,
    /// How long the established cluster's churn is kept up to see whether
    /// memory grows; `None` skips it.
    pub(crate) soak: Option<Duration>,
    /// The large cluster: a burst of its nodes at the raised QPS, and the
    /// established cluster's scenarios at its size. Full runs only.
    pub(crate) large: Option<Large>,
}

/// The large cluster's size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Large {
    pub(crate) nodes: usize,
    pub(crate) services: usize,
}

/// The peak RSS targets, in MiB.
pub(crate) mod rss_limit {
    /// A burst of 5,000 nodes, at either QPS.
    pub(crate) const BURST_5000: f64 = 96.0;
    /// The established cluster of 5,000 nodes and 1,000 Services.
    pub(crate) const STEADY_5000: f64 = 48.0;
    /// Anything at 10,000 nodes and 2,000 Services.
    pub(crate) const LARGE: f64 = 128.0;

    /// The target for a cluster of `nodes` nodes, when one is set.
    pub(crate) fn established(nodes: usize) -> Option<f64> {
        match nodes {
            5000 => Some(STEADY_5000),
            10_000 => Some(LARGE),
            _ => None,
        }
    }

    /// The target for a burst of `nodes` nodes, when one is set.
    pub(crate) fn burst(nodes: usize) -> Option<f64> {
        match nodes {
            5000 => Some(BURST_5000),
            10_000 => Some(LARGE),
            _ => None,
        }
    }
}

/// How often kubelet posts its Ready condition in the heartbeat storm.
pub(crate) const HEARTBEAT_PERIOD: Duration = Duration::from_secs(10);

impl Scale {
    /// Whether this is the size the targets are set for.
    pub(crate) fn is_full(&self) -> bool {
        self.name == "full"
    }

    pub(crate) const FULL: Self = Self {
        name: "full",
        default_qps_bursts: &[1000, 5000],
        raised_qps_bursts: &[1000, 5000],
        nodes: 5000,
        route_nodes: 5000,
        services: 1000,
        steady_window: Duration::from_secs(600),
        heartbeat_rounds: 6,
        admission_seconds: 60,
        soak: Some(Duration::from_secs(30 * 60)),
        large: Some(Large {
            nodes: 10_000,
            services: 2_000,
        }),
    };

    pub(crate) const QUICK: Self = Self {
        name: "quick",
        default_qps_bursts: &[200],
        raised_qps_bursts: &[1000],
        nodes: 200,
        route_nodes: 100,
        services: 50,
        steady_window: Duration::from_secs(20),
        heartbeat_rounds: 2,
        admission_seconds: 10,
        soak: Some(Duration::from_secs(60)),
        large: None,
    };

    /// The established cluster at the large size, all else alike.
    pub(crate) fn at(self, large: Large) -> Self {
        Self {
            nodes: large.nodes,
            services: large.services,
            soak: None,
            large: None,
            ..self
        }
    }
}

/// One figure a scenario reports.
#[derive(Debug, Clone)]
pub(crate) struct Figure {
    pub(crate) name: String,
    pub(crate) value: Value,
    pub(crate) unit: &'static str,
}

impl Figure {
    pub(crate) fn new(
        name: impl Into<String>,
        value: impl Into<Value>,
        unit: &'static str,
    ) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            unit,
        }
    }

    /// Seconds, to the tenth.
    pub(crate) fn seconds(name: impl Into<String>, seconds: f64) -> Self {
        Self::new(name, (seconds * 10.0).round() / 10.0, "s")
    }
}

/// One interface operation: our calls next to upstream's.
#[derive(Debug, Clone)]
pub(crate) struct CallRow {
    /// Upstream's name of the operation.
    pub(crate) operation: String,
    /// Our calls that reached the cloud, any outcome.
    pub(crate) ours: u64,
    /// Of which answered Throttled.
    pub(crate) throttled: u64,
    /// Our calls by our operation name (batch or single).
    pub(crate) ours_detail: String,
    pub(crate) upstream: Option<f64>,
    pub(crate) basis: String,
}

impl CallRow {
    /// ours ÷ upstream; `None` when upstream makes no call.
    pub(crate) fn ratio(&self) -> Option<f64> {
        self.upstream
            .filter(|u| *u > 0.0)
            .map(|u| self.ours as f64 / u)
    }
}

/// A target and whether the figures meet it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) limit: String,
    pub(crate) measured: String,
    pub(crate) met: bool,
}

/// Nodes initialized over time, for the plot.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) label: String,
    /// Plots are grouped by this (the CCM's client QPS).
    pub(crate) panel: String,
    pub(crate) total: usize,
    /// Seconds since the first registration → nodes initialized.
    pub(crate) points: Vec<(f64, u64)>,
    /// Seconds since the first registration → the CCM's resident memory
    /// (VmRSS), in MiB.
    pub(crate) rss: Vec<(f64, f64)>,
}

/// Whether the scenario ran to its end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Status {
    Complete,
    /// Why it stopped short; its figures are what was measured until then.
    Incomplete(String),
    /// Why it did not run.
    NotRun(String),
}

/// One scenario's results.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) ccm_flags: String,
    /// The CCM's client QPS, short, to tell runs of one scenario apart.
    pub(crate) client: String,
    pub(crate) status: Status,
    pub(crate) figures: Vec<Figure>,
    pub(crate) calls: Vec<CallRow>,
    pub(crate) targets: Vec<Target>,
    pub(crate) notes: Vec<String>,
    pub(crate) series: Option<Series>,
}

impl Scenario {
    pub(crate) fn new(id: impl Into<String>, title: impl Into<String>, qps: KubeApiQps) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            ccm_flags: qps.describe(),
            client: qps.short(),
            status: Status::Complete,
            figures: Vec::new(),
            calls: Vec::new(),
            targets: Vec::new(),
            notes: Vec::new(),
            series: None,
        }
    }

    pub(crate) fn not_run(mut self, why: impl Into<String>) -> Self {
        self.status = Status::NotRun(why.into());
        self
    }

    pub(crate) fn figure(&mut self, figure: Figure) {
        self.figures.push(figure);
    }

    pub(crate) fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub(crate) fn target(
        &mut self,
        name: impl Into<String>,
        limit: impl Into<String>,
        measured: impl Into<String>,
        met: bool,
    ) {
        self.targets.push(Target {
            name: name.into(),
            limit: limit.into(),
            measured: measured.into(),
            met,
        });
    }

    /// Sets the call table from our calls and upstream's model, and the
    /// modeled upstream duration as a figure.
    pub(crate) fn compare(&mut self, ours: &Calls, model: &Model, scale_to_hour: Option<Duration>) {
        self.calls = compare(ours, model, scale_to_hour);
        if let Some((seconds, why)) = &model.seconds {
            self.figure(Figure::seconds(
                "upstream's algorithm would need at least (modeled)",
                *seconds,
            ));
            self.note(format!("Upstream's modeled duration: {why}."));
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "title": self.title,
            "ccm_flags": self.ccm_flags,
            "client_qps": self.client,
            "status": match &self.status {
                Status::Complete => json!({"complete": true}),
                Status::Incomplete(why) => json!({"complete": false, "reason": why}),
                Status::NotRun(why) => json!({"complete": false, "not_run": why}),
            },
            "figures": self.figures.iter().map(|f| json!({"name": f.name, "value": f.value, "unit": f.unit})).collect::<Vec<_>>(),
            "cloud_calls": self.calls.iter().map(|c| json!({
                "operation": c.operation,
                "ours": c.ours,
                "ours_throttled": c.throttled,
                "ours_detail": c.ours_detail,
                "upstream": c.upstream,
                "upstream_basis": c.basis,
                "ratio": c.ratio(),
            })).collect::<Vec<_>>(),
            "targets": self.targets.iter().map(|t| json!({
                "target": t.name, "limit": t.limit, "measured": t.measured, "met": t.met,
            })).collect::<Vec<_>>(),
            "notes": self.notes,
            "series": self.series.as_ref().map(|s| json!({
                "label": s.label, "total": s.total,
                "points": s.points.iter().map(|(t, n)| json!([t, n])).collect::<Vec<_>>(),
                "rss_mib": s.rss.iter().map(|(t, m)| json!([t, m])).collect::<Vec<_>>(),
            })),
        })
    }
}

/// Upstream's name for our operation; batch and single forms map to one.
fn upstream_name(ours: &str) -> &'static str {
    match ours {
        "instances_metadata" | "instance_metadata" => "InstanceMetadata",
        "instances_exist" | "instance_exists" => "InstanceExists",
        "instances_shutdown" | "instance_shutdown" => "InstanceShutdown",
        "get_load_balancer" => "GetLoadBalancer",
        "ensure_load_balancer" => "EnsureLoadBalancer",
        "update_load_balancer" => "UpdateLoadBalancer",
        "ensure_load_balancer_deleted" => "EnsureLoadBalancerDeleted",
        "list_routes" => "ListRoutes",
        "create_route" => "CreateRoute",
        "delete_route" => "DeleteRoute",
        "initialize" => "Initialize",
        _ => "other",
    }
}

/// Our calls by upstream operation next to the model's; per hour when
/// `scale_to_hour` gives the window they were counted over.
fn compare(ours: &Calls, model: &Model, scale_to_hour: Option<Duration>) -> Vec<CallRow> {
    let factor = scale_to_hour.map_or(1.0, |w| 3600.0 / w.as_secs_f64());
    let mut rows: BTreeMap<&'static str, CallRow> = BTreeMap::new();
    let row = |operation: &'static str| CallRow {
        operation: operation.to_owned(),
        ours: 0,
        throttled: 0,
        ours_detail: String::new(),
        upstream: None,
        basis: String::new(),
    };
    let mut detail: BTreeMap<&'static str, BTreeMap<&str, u64>> = BTreeMap::new();
    for ((operation, outcome), n) in ours {
        // A fenced call never reached the cloud.
        if outcome == "fenced" {
            continue;
        }
        let name = upstream_name(operation);
        let entry = rows.entry(name).or_insert_with(|| row(name));
        entry.ours += n;
        if outcome == "throttled" {
            entry.throttled += n;
        }
        *detail
            .entry(name)
            .or_default()
            .entry(operation.as_str())
            .or_default() += n;
    }
    for expected in &model.calls {
        let entry = rows
            .entry(expected.operation)
            .or_insert_with(|| row(expected.operation));
        entry.upstream = Some(entry.upstream.unwrap_or(0.0) + expected.calls);
        entry.basis = expected.basis.clone();
    }
    for (name, entry) in &mut rows {
        entry.ours_detail = detail
            .get(name)
            .map(|d| {
                d.iter()
                    .map(|(op, n)| format!("{op} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        if factor != 1.0 {
            entry.ours = (entry.ours as f64 * factor).round() as u64;
            entry.throttled = (entry.throttled as f64 * factor).round() as u64;
            entry.upstream = entry.upstream.map(|u| u * factor);
            entry.ours_detail = format!("{} (in the window)", entry.ours_detail);
        }
    }
    rows.into_values().collect()
}

/// Our total calls and upstream's, over every row.
pub(crate) fn totals(rows: &[CallRow]) -> (u64, f64) {
    let ours = rows.iter().map(|r| r.ours).sum();
    let upstream = rows.iter().filter_map(|r| r.upstream).sum();
    (ours, upstream)
}

/// Figures on the CCM's API writes from the request log: per node (over
/// `nodes` nodes) and by resource.
pub(crate) fn write_figures(scenario: &mut Scenario, log: &RequestLog, nodes: Option<usize>) {
    if log.dropped() > 0 {
        scenario.note(format!(
            "The API server's request log dropped {} records: write counts are incomplete.",
            log.dropped()
        ));
    }
    let by_resource = log.ccm_writes();
    let total: u64 = by_resource.values().sum();
    let listed = by_resource
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    scenario.figure(Figure::new(
        "CCM writes to the API server, by resource",
        format!("{total}: {listed}"),
        "",
    ));
    if let Some(nodes) = nodes.filter(|n| *n > 0) {
        let per_node = log.ccm_node_writes();
        let sum: u64 = per_node.values().sum();
        let max = per_node.values().copied().max().unwrap_or(0);
        scenario.figure(Figure::new(
            "CCM writes per node (nodes + nodes/status), mean",
            (sum as f64 / nodes as f64 * 100.0).round() / 100.0,
            "",
        ));
        scenario.figure(Figure::new(
            "CCM writes per node (nodes + nodes/status), most for one node",
            max,
            "",
        ));
    }
}

/// Why a CCM loses its lease under load, when it does.
const LEASE_STARVED: &str = "The CCM renews its lease through the same Kubernetes client as its controllers, so renewals wait behind their writes in the client-side --kube-api-qps queue; a backlog longer than the 10 s renew deadline costs the lease, and the process exits. Upstream gives leader election a client of its own (and each controller its own too).";

/// Explains the CCM's exit when `err` says it lost its lease.
pub(crate) fn note_lease_loss(scenario: &mut Scenario, err: &anyhow::Error) {
    if format!("{err:#}").contains("not renewed within the renew deadline") {
        scenario.note(LEASE_STARVED);
    }
}

#[cfg(test)]
mod tests {
    use super::super::upstream::{self, Expected};
    use super::*;

    fn calls(list: &[(&str, &str, u64)]) -> Calls {
        list.iter()
            .map(|(op, outcome, n)| ((op.to_string(), outcome.to_string()), *n))
            .collect()
    }

    #[test]
    fn batch_and_single_calls_compare_to_one_upstream_operation() {
        let ours = calls(&[
            ("instances_metadata", "success", 24),
            ("instances_metadata", "throttled", 2),
            ("instance_metadata", "success", 1),
            ("update_load_balancer", "fenced", 9),
        ]);
        let model = Model {
            calls: vec![Expected {
                operation: "InstanceMetadata",
                calls: 5000.0,
                basis: "one per node".into(),
            }],
            seconds: None,
        };
        let rows = compare(&ours, &model, None);
        assert_eq!(rows.len(), 1, "fenced calls never reached the cloud");
        let row = &rows[0];
        assert_eq!((row.ours, row.throttled), (27, 2));
        assert_eq!(row.ratio(), Some(27.0 / 5000.0));
        assert_eq!(
            row.ours_detail,
            "instance_metadata 1, instances_metadata 26"
        );
    }

    #[test]
    fn window_counts_scale_to_an_hour() {
        let ours = calls(&[("list_routes", "success", 60)]);
        let model = upstream::steady(5000, Duration::from_secs(600));
        let rows = compare(&ours, &model, Some(Duration::from_secs(600)));
        let lists = rows.iter().find(|r| r.operation == "ListRoutes").unwrap();
        assert_eq!(lists.ours, 360);
        assert_eq!(lists.upstream, Some(360.0));
        let (ours, upstream) = totals(&rows);
        assert_eq!(ours, 360);
        assert_eq!(upstream, 360.0 + 60_000.0);
    }

    #[test]
    fn no_ratio_where_upstream_makes_no_call() {
        let row = CallRow {
            operation: "UpdateLoadBalancer".into(),
            ours: 0,
            throttled: 0,
            ours_detail: String::new(),
            upstream: Some(0.0),
            basis: String::new(),
        };
        assert_eq!(row.ratio(), None);
    }
}
