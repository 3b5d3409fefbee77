//! docs/reliability/report.md, written from the suites' figures.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use super::figures_path;
use crate::cmd::output;

fn read(out: &Path, suite: &str) -> anyhow::Result<Value> {
    let path = figures_path(out, suite);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn verdict(v: &Value) -> &'static str {
    if v["passed"] == true {
        "met"
    } else {
        "**missed**"
    }
}

/// A JSON number or `-`.
fn n(v: &Value) -> String {
    match v {
        Value::Number(n) => n.as_f64().map_or_else(
            || n.to_string(),
            |f| {
                if f.fract() == 0.0 {
                    format!("{f:.0}")
                } else {
                    format!("{f:.3}")
                }
            },
        ),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// Writes the report from the figures in `out`.
pub(crate) fn write(out: &Path, path: &Path) -> anyhow::Result<()> {
    let crash = read(out, "crash-points")?;
    let aws = read(out, "aws-crash-points")?;
    let failover = read(out, "failover")?;
    let partition = read(out, "partition")?;
    let faults = read(out, "faults")?;
    let fuzz = read(out, "fuzz")?;
    let commit = output("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let date = jiff::Zoned::now().strftime("%Y-%m-%d").to_string();

    let mut md = String::new();
    writeln!(md, "# Reliability report\n")?;
    writeln!(
        md,
        "Written by `cargo xtask chaos` on {date} at commit `{}` on a {cores}-core machine. \
         Each suite runs real `fake-cloud-controller-manager` processes against the fake \
         cloud's server (`fake-cloud`, whose call log names the replica behind every call) \
         and the test API server; `testing/chaos` holds the suites. The AWS crash points run \
         `aws-cloud-controller-manager` against moto (`cmd/aws-cloud-controller-manager/tests/integration/crash_points`). Re-run with \
         `cargo xtask chaos`; CI runs `cargo xtask chaos --quick`.\n",
        commit.trim()
    )?;
    writeln!(md, "## Summary\n")?;
    writeln!(md, "| Suite | Figures | Goal | Result |\n|---|---|---|---|")?;
    writeln!(
        md,
        "| Crash points (fake cloud) | {} runs, {} crashed as planned, {} leaked, {} duplicated, {} not converged (scenario: {} mutations) | 0 leaked, 0 duplicated, all converge | {} |",
        n(&crash["runs"]),
        n(&crash["crashed"]),
        n(&crash["leaked"]),
        n(&crash["duplicated"]),
        n(&crash["not_converged"]),
        n(&crash["scenario_mutations"]),
        verdict(&crash)
    )?;
    writeln!(
        md,
        "| Crash points (AWS against moto) | {} runs, {} crashed as planned, {} leaked, {} duplicated, {} not converged (scenario: {} mutations) | ≥ 20 runs; 0 leaked, 0 duplicated, all converge | {} |",
        n(&aws["runs"]),
        n(&aws["crashed"]),
        n(&aws["leaked"]),
        n(&aws["duplicated"]),
        n(&aws["not_converged"]),
        n(&aws["scenario_mutations"]),
        if aws["runs"].as_u64().unwrap_or_default() >= 20 {
            verdict(&aws)
        } else {
            "**missed**"
        }
    )?;
    writeln!(
        md,
        "| Failover | {} failovers ({} SIGKILL, {} SIGSTOP/SIGCONT), {} mutations judged, {} unfenced, {} overlapping; failover p50 {} ms, p99 {} ms, max {} ms | 0 unfenced, p99 ≤ lease + retry = {} ms | {} |",
        n(&failover["failovers"]),
        n(&failover["kills"]),
        n(&failover["freezes"]),
        n(&failover["mutations_judged"]),
        n(&failover["unfenced"]),
        n(&failover["overlapping"]),
        n(&failover["failover_ms"]["p50"]),
        n(&failover["failover_ms"]["p99"]),
        n(&failover["failover_ms"]["max"]),
        failover["lease_ms"].as_u64().unwrap_or_default()
            + failover["retry_ms"].as_u64().unwrap_or_default(),
        verdict(&failover)
    )?;
    let rounds = partition["rounds"].as_array().cloned().unwrap_or_default();
    let took_over: Vec<String> = rounds.iter().map(|r| n(&r["took_over_ms"])).collect();
    let margins: Vec<String> = rounds
        .iter()
        .map(|r| n(&r["last_mutation_before_expiry_ms"]))
        .collect();
    writeln!(
        md,
        "| Partition | {} partitions; another replica led after {} ms; every partitioned leader exited: {}; its last mutation came {} ms before its lease could expire; {} unfenced | stops mutating before its lease could expire; another takes over | {} |",
        n(&partition["partitions"]),
        took_over.join(", "),
        rounds.iter().all(|r| r["partitioned_exited"] == true),
        margins.join(", "),
        n(&partition["unfenced"]),
        verdict(&partition)
    )?;
    writeln!(
        md,
        "| Faults | {} s of 30% cloud errors and API server faults; CPU {} cores, {} cloud calls/s, {} API requests/s; converged {} ms after the faults stopped; {} leaked, {} duplicated, {} unfenced | converge within {} ms, no hot loop | {} |",
        n(&faults["fault_seconds"]),
        n(&faults["cpu_cores"]),
        n(&faults["cloud_calls_per_s"]),
        n(&faults["api_requests_per_s"]),
        n(&faults["converged_after_ms"]),
        n(&faults["leaked"]),
        n(&faults["duplicated"]),
        n(&faults["unfenced"]),
        n(&faults["converge_bound_ms"]),
        verdict(&faults)
    )?;
    let targets = fuzz["targets"].as_array().cloned().unwrap_or_default();
    let executions: u64 = targets
        .iter()
        .filter_map(|t| t["executions"].as_u64())
        .sum();
    let panics: u64 = targets.iter().filter_map(|t| t["panics"].as_u64()).sum();
    writeln!(
        md,
        "| Fuzzing | {} targets, {executions} executions, {panics} panics | 0 panics | {} |\n",
        targets.len(),
        if panics == 0 { "met" } else { "**missed**" }
    )?;
    writeln!(
        md,
        "## Fuzz targets\n\n| Target | Seconds | Executions | Panics |\n|---|---|---|---|"
    )?;
    for t in &targets {
        writeln!(
            md,
            "| `{}` | {} | {} | {} |",
            t["target"].as_str().unwrap_or_default(),
            n(&t["seconds"]),
            n(&t["executions"]),
            n(&t["panics"])
        )?;
    }
    writeln!(md, "\n## How each suite judges\n")?;
    md.push_str(
        "- **Crash points.** The fake cloud's server traps the k-th successful mutation: it is applied, then its answer and every later call are held until the replica has been killed with SIGKILL; a new replica takes over once the lease lapses. After four phases of node and Service changes the world must converge: exactly one load balancer per LoadBalancer Service (named from its UID), none for others, each sending to every node, status and finalizer in step, routes equal to the nodes' pod CIDRs. Calls in flight when the trap trips may land too, so a run is killed after mutation k or a little later (the figures say which).\n\
- **Crash points against AWS.** A proxy in front of moto counts the AWS calls that change something (by their `Action`); the k-th is applied by moto, then its answer and every later request are held until `aws-cloud-controller-manager` has been killed with SIGKILL, and a new process takes over. After three phases (nodes joining and leaving, Network Load Balancer Services created, changed, turned into ClusterIP and deleted) moto must hold exactly one load balancer per LoadBalancer Service, each listener on a Service port forwarding to a target group holding every node on the node port, no target group or load-balancer security group left over, Service status and finalizers in step, and instance routes equal to the pod CIDRs.\n\
- **Failover and partition.** The harness watches the Lease and builds each holder's terms (acquire time to last renewal plus the lease duration). Every mutation the cloud applied is judged at the moment it reached the cloud: *unfenced* when its caller held no valid term then, *overlapping* when another replica's term had already begun. Failover time runs from the signal to the new holder's acquisition.\n\
- **Faults.** The cloud fails 30% of calls (a third each: throttled, 503, or timed out after being applied), every call 20 ms slower; the API server answers 50 ms slower, fails three requests with 500 every second, cuts every watch every 5 s and expires watches (410) every 10 s. CPU is the replicas' user and system time over the window.\n\n",
    );
    writeln!(md, "## Not covered yet\n")?;
    md.push_str(
        "- The AWS crash points judge load balancers, target groups, listeners, targets, the load balancers' security groups and routes; they do not judge the rules added to the nodes' security group.\n\
- Fencing closes the gap between the leadership check and the wire for every request with a body (each fake cloud and AWS call, DigitalOcean's POST and PUT): the body asks again when the connection writes it. A DigitalOcean DELETE has no body, so it is checked just before it is sent. A process frozen in the few instructions between a body's check and its write is not covered; without a fencing token on the cloud's side, nothing can cover it.\n",
    );
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, md).with_context(|| format!("writing {}", path.display()))
}
