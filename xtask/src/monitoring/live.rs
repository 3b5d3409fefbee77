//! The Prometheus run: the sandbox's test API server and fake CCM, a real
//! Prometheus evaluating the chart's rules with short `for:` windows, and a
//! scripted fault whose alerts must go pending → firing → inactive.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::prometheus::{self, Alert, JOB};
use super::rules;
use crate::cmd::target_dir;
use crate::http;
use crate::processes::Processes;
use crate::sandbox::access::Access;

/// Nodes and Services the test API server seeds (node-1.., lb-1..).
const NODES: usize = 3;
const SERVICES: usize = 1;

/// The fake cloud knows the seeded nodes only, so a node added later stays
/// uninitialized.
fn cloud_config() -> String {
    let mut text = String::from("[settings]\nbatch_size = 100\n");
    for i in 1..=NODES {
        text.push_str(&format!(
            "\n[[instances]]\nname = \"node-{i}\"\naddresses = [{{ type = \"InternalIP\", address = \"10.0.0.{i}\" }}]\n"
        ));
    }
    text
}

/// The `for:` window both faulted alerts get in this run.
const FOR: &str = "20s";
const LOAD_BALANCER_ALERT: &str = "CloudControllerManagerLoadBalancerFailing";
const NODE_ALERT: &str = "CloudControllerManagerNodeUninitialized";

/// The fake cloud fails every load-balancer call for a Service carrying
/// this annotation (`ccm_provider_fake::ANNOTATION_FAIL`).
const FAIL_ANNOTATION: &str = "service.beta.kubernetes.io/fake-load-balancer-fail";
const BROKEN_SERVICE: &str = "broken";
const GHOST_NODE: &str = "ghost-1";

pub(crate) fn run(dir: &Path, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    crate::processes::build_sandbox_binaries()?;
    let target = target_dir();
    let kubeconfig = dir.join("kubeconfig");
    let access = Access::write(dir)?;
    let mut processes = Processes::new(dir);
    let api = processes.start_api_server_with(
        &target.join("debug/test-apiserver"),
        &kubeconfig,
        NODES,
        SERVICES,
        &access.api_server_args(),
    )?;
    access.grant(api)?;
    let cloud_config_file = dir.join("cloud.toml");
    std::fs::write(&cloud_config_file, cloud_config())?;
    let metrics = processes.start_ccm_with(
        &target.join("debug/fake-cloud-controller-manager"),
        &kubeconfig,
        &[
            format!("--cloud-config={}", cloud_config_file.display()),
            "--cluster-name=monitoring".to_owned(),
            "--allocate-node-cidrs=true".to_owned(),
            "--cluster-cidr=10.244.0.0/16".to_owned(),
            // The node the cloud does not know must stay, uninitialized.
            "--controllers=*,-cloud-node-lifecycle".to_owned(),
            "--v=2".to_owned(),
        ],
    )?;
    let token_file = dir.join("metrics-reader.token");
    std::fs::write(&token_file, access.metrics_reader_token())?;
    let for_nodes = format!("monitoring.rules.uninitializedNodeFor={FOR}");
    let for_load_balancers = format!("monitoring.rules.loadBalancerFailingFor={FOR}");
    let rules_file = rules::render(
        &dir.join("rules-live.json"),
        &[&for_nodes, &for_load_balancers],
    )?;
    let prometheus_dir = dir.join("prometheus");
    std::fs::create_dir_all(&prometheus_dir)?;
    let prom = prometheus::start(
        &mut processes,
        &prometheus_dir,
        metrics,
        &token_file,
        &rules_file,
    )?;
    println!(
        "monitoring: Prometheus on http://{prom} scrapes the CCM at https://{metrics}/metrics every {:?}",
        prometheus::INTERVAL
    );

    let started = Instant::now();
    let healthy = [
        format!("up{{job=\"{JOB}\"}} == 1"),
        format!(
            "sum(ccm_service_load_balancers{{job=\"{JOB}\", state=\"provisioned\"}}) == {SERVICES}"
        ),
        format!("absent(ccm_node_uninitialized{{job=\"{JOB}\"}})"),
    ];
    poll(
        &mut processes,
        deadline,
        "the CCM scraped, nodes initialized, load balancers provisioned",
        || {
            for promql in &healthy {
                if prometheus::query(prom, promql)?.is_empty() {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )?;
    println!(
        "monitoring: healthy after {:.1} s: {NODES} nodes initialized, {SERVICES} load balancer provisioned, no alert firing",
        started.elapsed().as_secs_f64()
    );
    ensure_none_firing(prom, &[])?;

    let fault = Instant::now();
    inject(api, &access)?;
    println!(
        "monitoring: fault at 0.0 s: Service default/{BROKEN_SERVICE}'s load-balancer calls fail, node {GHOST_NODE} is unknown to the cloud (for: {FOR})"
    );
    let mut timeline = Timeline::new(fault);
    poll(&mut processes, deadline, "both alerts firing", || {
        let active = prometheus::alerts(prom)?;
        timeline.observe(&active);
        Ok(timeline.firing_both().then_some(()))
    })?;
    let active = prometheus::alerts(prom)?;
    check_labels(&active)?;
    ensure_none_firing(prom, &[LOAD_BALANCER_ALERT, NODE_ALERT])?;
    dashboard_returns_data(prom)?;

    let ended = fault.elapsed();
    heal(api, &access)?;
    println!(
        "monitoring: fault ended at {:.1} s: annotation removed, node {GHOST_NODE} deleted",
        ended.as_secs_f64()
    );
    poll(&mut processes, deadline, "both alerts inactive", || {
        let active = prometheus::alerts(prom)?;
        timeline.observe(&active);
        Ok(timeline.inactive_both().then_some(()))
    })?;
    timeline.print();
    timeline.in_order()?;
    ensure_none_firing(prom, &[])?;
    println!(
        "monitoring: pending → firing under the fault, inactive after it, for both alerts ({:.1} s in all)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Calls `check` every second until it gives a value, failing at
/// `deadline` or when a process died.
fn poll<T>(
    processes: &mut Processes,
    deadline: Instant,
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let mut last_error = None;
    loop {
        processes.check_alive()?;
        match check() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(err) => last_error = Some(err),
        }
        if Instant::now() > deadline {
            match last_error {
                Some(err) => bail!("timed out waiting for {what}; last error: {err:#}"),
                None => bail!("timed out waiting for {what}"),
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A LoadBalancer Service the fake cloud fails, and a tainted node it does
/// not know.
fn inject(api: SocketAddr, access: &Access) -> anyhow::Result<()> {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": BROKEN_SERVICE,
            "namespace": "default",
            "annotations": { FAIL_ANNOTATION: "scripted outage" },
        },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80, "targetPort": 8080 }] },
    });
    send(
        api,
        access,
        "POST",
        "/api/v1/namespaces/default/services",
        Some(("application/json", &service)),
        201,
    )?;
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": GHOST_NODE },
        "spec": {
            "taints": [{
                "key": "node.cloudprovider.kubernetes.io/uninitialized",
                "value": "true",
                "effect": "NoSchedule",
            }],
        },
    });
    send(
        api,
        access,
        "POST",
        "/api/v1/nodes",
        Some(("application/json", &node)),
        201,
    )
}

/// Ends the fault: the annotation removed, the unknown node deleted.
fn heal(api: SocketAddr, access: &Access) -> anyhow::Result<()> {
    let patch = json!({ "metadata": { "annotations": { FAIL_ANNOTATION: null } } });
    send(
        api,
        access,
        "PATCH",
        &format!("/api/v1/namespaces/default/services/{BROKEN_SERVICE}"),
        Some(("application/merge-patch+json", &patch)),
        200,
    )?;
    send(
        api,
        access,
        "DELETE",
        &format!("/api/v1/nodes/{GHOST_NODE}"),
        None,
        200,
    )
}

fn send(
    api: SocketAddr,
    access: &Access,
    method: &str,
    path: &str,
    body: Option<(&str, &Value)>,
    expected: u16,
) -> anyhow::Result<()> {
    let text = body.map(|(kind, value)| (kind, value.to_string()));
    let response = http::request_as(
        api,
        method,
        path,
        text.as_ref().map(|(kind, body)| (*kind, body.as_str())),
        Some(access.admin_token()),
    )?;
    ensure!(
        response.status == expected,
        "{method} {path}: HTTP {}: {}",
        response.status,
        response.body
    );
    Ok(())
}

/// The faulted alerts name the faulted objects.
fn check_labels(active: &[Alert]) -> anyhow::Result<()> {
    let find = |name: &str| {
        active
            .iter()
            .find(|a| a.name == name && a.state == "firing")
            .with_context(|| format!("{name} is not firing"))
    };
    let lb = find(LOAD_BALANCER_ALERT)?;
    ensure!(
        lb.labels["namespace"] == "default" && lb.labels["service"] == BROKEN_SERVICE,
        "{LOAD_BALANCER_ALERT} names {}, not default/{BROKEN_SERVICE}",
        lb.labels
    );
    let node = find(NODE_ALERT)?;
    ensure!(
        node.labels["node"] == GHOST_NODE,
        "{NODE_ALERT} names {}, not {GHOST_NODE}",
        node.labels
    );
    Ok(())
}

/// No alert but those in `expected` is firing (pending ones may be: the
/// faulted Service's errors make CloudControllerManagerCloudErrors pending,
/// with a `for:` far longer than this run).
fn ensure_none_firing(prom: SocketAddr, expected: &[&str]) -> anyhow::Result<()> {
    let unexpected: Vec<String> = prometheus::alerts(prom)?
        .into_iter()
        .filter(|a| a.state == "firing" && !expected.contains(&a.name.as_str()))
        .map(|a| format!("{} {}", a.name, a.labels))
        .collect();
    ensure!(
        unexpected.is_empty(),
        "alerts firing that should not: {unexpected:?}"
    );
    Ok(())
}

/// Every panel query of the chart's dashboard, with `$job` set to this
/// run's job, returns at least one series.
fn dashboard_returns_data(prom: SocketAddr) -> anyhow::Result<()> {
    let path = crate::chart::render::chart_dir().join("dashboards/cloud-controller-manager.json");
    let dashboard: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    let mut empty = Vec::new();
    let mut count = 0;
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let Some(expr) = target["expr"].as_str() else {
                continue;
            };
            count += 1;
            let series = prometheus::query(prom, &expr.replace("$job", JOB))?;
            if series.is_empty() {
                empty.push(format!("{}: {expr}", panel["title"]));
            }
        }
    }
    ensure!(count > 0, "the dashboard has no queries");
    ensure!(
        empty.is_empty(),
        "dashboard queries that returned no data from Prometheus:\n  {}",
        empty.join("\n  ")
    );
    println!("monitoring: all {count} dashboard queries returned data");
    Ok(())
}

/// When each faulted alert was first seen pending, firing, and gone.
struct Timeline {
    start: Instant,
    seen: BTreeMap<&'static str, [Option<Duration>; 3]>,
}

const PENDING: usize = 0;
const FIRING: usize = 1;
const INACTIVE: usize = 2;

impl Timeline {
    fn new(start: Instant) -> Self {
        Self {
            start,
            seen: [(LOAD_BALANCER_ALERT, [None; 3]), (NODE_ALERT, [None; 3])].into(),
        }
    }

    fn observe(&mut self, active: &[Alert]) {
        let now = self.start.elapsed();
        for (name, times) in &mut self.seen {
            let state = active
                .iter()
                .find(|a| a.name == *name)
                .map(|a| a.state.as_str());
            let slot = match state {
                Some("pending") => PENDING,
                Some("firing") => FIRING,
                Some(_) => continue,
                // Gone counts only once it had fired.
                None if times[FIRING].is_some() => INACTIVE,
                None => continue,
            };
            times[slot].get_or_insert(now);
        }
    }

    fn firing_both(&self) -> bool {
        self.seen.values().all(|t| t[FIRING].is_some())
    }

    fn inactive_both(&self) -> bool {
        self.seen.values().all(|t| t[INACTIVE].is_some())
    }

    /// Each alert was seen pending, then firing, then inactive.
    fn in_order(&self) -> anyhow::Result<()> {
        for (name, times) in &self.seen {
            let [Some(pending), Some(firing), Some(inactive)] = times else {
                bail!("{name} was not seen in every state: {times:?}");
            };
            ensure!(
                pending <= firing && firing <= inactive,
                "{name} went through its states out of order: {times:?}"
            );
        }
        Ok(())
    }

    fn print(&self) {
        let at = |t: Option<Duration>| {
            t.map_or_else(
                || "never seen".to_owned(),
                |d| format!("{:5.1} s", d.as_secs_f64()),
            )
        };
        for (name, times) in &self.seen {
            println!(
                "  {name:<42} pending at {}, firing at {}, inactive at {}",
                at(times[PENDING]),
                at(times[FIRING]),
                at(times[INACTIVE])
            );
        }
    }
}
