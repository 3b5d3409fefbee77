//! The report: a Markdown page and the same figures as JSON.

use std::fmt::Write;

use serde_json::{Value, json};

use super::harness::CLOUD_CONFIG;
use super::machine::{Machine, OtherActivity};
use super::scenarios::{CallRow, Scenario, Status, totals};

/// What a report needs besides the scenarios.
#[derive(Debug)]
pub(crate) struct Run<'a> {
    pub(crate) mode: &'static str,
    /// UTC, RFC 3339.
    pub(crate) started: String,
    pub(crate) took_seconds: f64,
    pub(crate) commit: String,
    pub(crate) machine: &'a Machine,
    pub(crate) others: &'a OtherActivity,
    pub(crate) notes: &'a [String],
}

/// The file name of the plot, next to the report.
pub(crate) const PLOT: &str = "node-initialization.svg";

pub(crate) fn json(run: &Run<'_>, scenarios: &[Scenario]) -> Value {
    json!({
        "mode": run.mode,
        "started": run.started,
        "took_seconds": run.took_seconds.round(),
        "commit": run.commit,
        "machine": run.machine.to_json(run.others),
        "fake_cloud_config": CLOUD_CONFIG,
        "notes": run.notes,
        "targets": scenarios.iter().flat_map(|s| s.targets.iter().map(move |t| json!({
            "scenario": s.id, "target": t.name, "limit": t.limit, "measured": t.measured, "met": t.met,
        }))).collect::<Vec<_>>(),
        "scenarios": scenarios.iter().map(Scenario::to_json).collect::<Vec<_>>(),
    })
}

pub(crate) fn markdown(run: &Run<'_>, scenarios: &[Scenario], plotted: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Scale benchmark\n");
    let _ = writeln!(
        out,
        "`cargo xtask bench{}`: {} run of {}, commit {}, {:.0} min. Release builds of `fake-cloud-controller-manager`, `fake-cloud` and `test-apiserver`, as separate processes on this machine.\n",
        if run.mode == "quick" { " --quick" } else { "" },
        run.mode,
        run.started,
        run.commit,
        run.took_seconds / 60.0
    );
    setup(&mut out);
    targets(&mut out, scenarios);
    machine(&mut out, run);
    if !run.notes.is_empty() {
        let _ = writeln!(out, "## Notes on this run\n");
        for note in run.notes {
            let _ = writeln!(out, "- {note}");
        }
        out.push('\n');
    }
    if plotted {
        let _ = writeln!(
            out,
            "## Node initialization over time\n\n![Nodes initialized over time, per burst]({PLOT})\n"
        );
    }
    for scenario in scenarios {
        section(&mut out, scenario);
    }
    out
}

fn setup(out: &mut String) {
    let _ = writeln!(
        out,
        "## Setup\n\n\
         - The fake cloud behaves like a real one: 50 ms per call, 20 calls/s with `Throttled` beyond (burst 20), batches of up to 200 nodes (what the AWS and DigitalOcean providers declare), an instance for any node name. It runs as its own process (`fake-cloud`, which the CCM reaches over loopback HTTP through its `[server]` cloud config), so the CCM's memory figures are the CCM's alone.\n\
         - The CCM runs with upstream's default flags plus `--kubeconfig`, `--cloud-config`, `--cluster-cidr=10.0.0.0/8`, `--bind-address`/`--secure-port`; each scenario says which `--kube-api-qps` it ran with.\n\
         - Nodes register as kubelets do (`node.cloudprovider.kubernetes.io/uninitialized:NoSchedule`, a Hostname address, Ready=True). The driver's own API requests (user agent `xtask`) are left out of the write counts.\n\
         - \"Upstream\" is the number of cloud calls upstream's Go controllers (k8s.io/cloud-provider) make for the same work at their default flags, computed from their algorithm: one `InstanceMetadata` per node at initialization and per node at each 5-minute status refresh; one `InstanceExists` per not-Ready node every 5 s; `UpdateLoadBalancer` for every load balancer at each node-set sync; a `ListRoutes` every 10 s. A node-set sync is upstream's `syncNodes`, which runs on node additions, deletions and changes of a node's exclusion label or provider ID (never on heartbeats; the 100 s informer resync replays unchanged nodes, which it ignores) and updates every load balancer whose node set changed. Failures and retries are not counted, so upstream's figures are lower bounds. Our counts include every call that reached the cloud, throttled ones too.\n"
    );
}

fn targets(out: &mut String, scenarios: &[Scenario]) {
    if scenarios.iter().all(|s| s.targets.is_empty()) {
        let _ = writeln!(out, "## Targets\n\nNone evaluated in this run.\n");
        return;
    }
    let _ = writeln!(
        out,
        "## Targets\n\n| Scenario | CCM | Target | Limit | Measured | Met |\n|---|---|---|---|---|---|"
    );
    for s in scenarios {
        for t in &s.targets {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                s.title,
                s.client,
                t.name,
                t.limit,
                t.measured,
                if t.met { "met" } else { "**not met**" }
            );
        }
    }
    out.push('\n');
}

fn machine(out: &mut String, run: &Run<'_>) {
    let m = run.machine;
    let others = if run.others.busy.is_empty() {
        "nothing else used 1% of a core or more".to_owned()
    } else {
        run.others
            .busy
            .iter()
            .map(|(name, share)| format!("`{name}` {share}%"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "## Machine\n\n\
         - CPU: {} × {} cores\n\
         - Memory: {} GiB\n\
         - Kernel: Linux {}\n\
         - Load average (1, 5, 15 min): {} at the start, {} at the end\n\
         - Other processes during the run (CPU, share of one core, averaged over the run): {others}\n",
        m.cpu, m.cores, m.memory_gib, m.kernel, m.load_at_start, run.others.load_at_end
    );
}

fn section(out: &mut String, s: &Scenario) {
    let _ = writeln!(
        out,
        "## {} — {}\n\nCCM: {}.\n",
        s.title, s.client, s.ccm_flags
    );
    match &s.status {
        Status::Complete => {}
        Status::Incomplete(why) => {
            let _ = writeln!(out, "**Stopped early:** {why}\n");
        }
        Status::NotRun(why) => {
            let _ = writeln!(out, "**Not run:** {why}\n");
            return;
        }
    }
    if !s.figures.is_empty() {
        let _ = writeln!(out, "| Figure | Value |\n|---|---|");
        for f in &s.figures {
            let _ = writeln!(out, "| {} | {} |", f.name, value(&f.value, f.unit));
        }
        out.push('\n');
    }
    if !s.calls.is_empty() {
        calls(out, &s.calls, s.id.starts_with("steady"));
    }
    for note in &s.notes {
        let _ = writeln!(out, "- {note}");
    }
    if !s.notes.is_empty() {
        out.push('\n');
    }
}

fn calls(out: &mut String, rows: &[CallRow], per_hour: bool) {
    let unit = if per_hour { " per hour" } else { "" };
    let _ = writeln!(
        out,
        "| Cloud operation | Ours{unit} | of which Throttled | Ours by call | Upstream's algorithm{unit} | Ours ÷ upstream | Upstream's count |\n|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.operation,
            r.ours,
            r.throttled,
            r.ours_detail,
            r.upstream.map_or_else(|| "—".to_owned(), count),
            ratio(r.ours, r.upstream),
            r.basis
        );
    }
    let (ours, upstream) = totals(rows);
    let _ = writeln!(
        out,
        "| **All** | **{ours}** | {} | | **{}** | **{}** | |\n",
        rows.iter().map(|r| r.throttled).sum::<u64>(),
        count(upstream),
        ratio(ours, Some(upstream))
    );
}

fn count(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

/// ours ÷ upstream, with the percentage for small ratios.
fn ratio(ours: u64, upstream: Option<f64>) -> String {
    match upstream {
        Some(u) if u > 0.0 => {
            let r = ours as f64 / u;
            if r < 0.1 {
                format!("{r:.4} ({:.2}%)", r * 100.0)
            } else {
                format!("{r:.2}")
            }
        }
        _ if ours == 0 => "— (both 0)".to_owned(),
        _ => "∞ (upstream 0)".to_owned(),
    }
}

fn value(v: &Value, unit: &str) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() != 0.0 => format!("{f:.2}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_owned(),
            _ => n.to_string(),
        },
        other => other.to_string(),
    };
    if unit.is_empty() {
        text
    } else {
        format!("{text} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_show_small_shares_as_percentages() {
        assert_eq!(ratio(25, Some(5000.0)), "0.0050 (0.50%)");
        assert_eq!(ratio(2000, Some(2000.0)), "1.00");
        assert_eq!(ratio(0, Some(0.0)), "— (both 0)");
        assert_eq!(ratio(3, Some(0.0)), "∞ (upstream 0)");
    }

    #[test]
    fn values_carry_their_unit_and_no_trailing_zeros() {
        assert_eq!(value(&json!(12.5), "s"), "12.5 s");
        assert_eq!(value(&json!(3), ""), "3");
        assert_eq!(value(&json!("5: nodes 5"), ""), "5: nodes 5");
    }
}
