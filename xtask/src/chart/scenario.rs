//! The requests a real CCM sends: the fake-cloud-controller-manager, run
//! with the arguments the chart renders, against the test API server,
//! through a scenario that makes every controller act.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::rbac::Request;
use crate::cmd::{cargo, run, target_dir};
use crate::http;
use crate::processes::Processes;
use crate::sandbox::status::Status;

/// Objects the test API server starts with: uninitialized nodes with pod
/// CIDRs, and LoadBalancer Services in `default`.
const SEED_NODES: usize = 3;
const SEED_SERVICES: usize = 2;
/// The seeded Service the scenario deletes.
const DELETED_SERVICE: &str = "lb-2";
/// A Service the scenario creates, then changes.
const CREATED_SERVICE: &str = "rbac-check";
/// A node whose instance does not exist: its provider ID is not one the fake
/// cloud synthesizes for its name.
const GONE_NODE: &str = "node-gone";
/// Longer than the CCM's default --node-monitor-period (5 s): the lifecycle
/// controller has seen the node Ready before it turns NotReady.
const SEEN_READY: Duration = Duration::from_secs(8);
const STEP_TIMEOUT: Duration = Duration::from_secs(90);
/// The user agent of xtask's own requests, left out of the CCM's.
const XTASK_AGENT: &str = "xtask";

/// What the CCM sent.
#[derive(Debug)]
pub(crate) struct Traffic {
    pub(crate) resources: Vec<Request>,
    /// Paths outside the resource API (discovery, version).
    pub(crate) non_resource: Vec<String>,
}

/// Runs the scenario with the CCM started with `ccm_args` (the chart's, less
/// the endpoint flags) and `cloud_config`, and returns what it sent.
pub(crate) fn run_scenario(ccm_args: &[String], cloud_config: &str) -> anyhow::Result<Traffic> {
    run(cargo().args([
        "build",
        "--quiet",
        "-p",
        "ccm-test-apiserver",
        "-p",
        "fake-cloud-controller-manager",
    ]))?;
    let target = target_dir();
    let dir = target.join("chart-rbac");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kubeconfig = dir.join("kubeconfig");
    let cloud_config_path = dir.join("cloud.conf");
    std::fs::write(&cloud_config_path, cloud_config)?;
    let mut args = ccm_args.to_vec();
    args.push(format!("--cloud-config={}", cloud_config_path.display()));

    let mut processes = Processes::new(&dir);
    let api = processes.start_api_server(
        &target.join("debug/test-apiserver"),
        &kubeconfig,
        SEED_NODES,
        SEED_SERVICES,
    )?;
    let metrics = processes.start_ccm_with(
        &target.join("debug/fake-cloud-controller-manager"),
        &kubeconfig,
        &args,
    )?;
    println!("scenario: API server {api}, CCM logs in {}", dir.display());

    wait(
        &mut processes,
        "every node initialized and routed, every load balancer provisioned",
        |last| {
            let status = Status::read(api, metrics)?;
            *last = status.line();
            Ok(status.complete())
        },
    )?;
    exercise_services(&mut processes, api)?;
    exercise_lifecycle(&mut processes, api)?;
    // SIGTERM: the CCM releases its Lease on the way out.
    let exit = processes.stop("fake-cloud-controller-manager")?;
    ensure!(
        exit.success(),
        "the CCM exited with {exit} on SIGTERM; see {}",
        dir.join("ccm.log").display()
    );
    traffic(api)
}

fn exercise_services(processes: &mut Processes, api: SocketAddr) -> anyhow::Result<()> {
    let services = "/api/v1/namespaces/default/services";
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": CREATED_SERVICE, "namespace": "default" },
        "spec": { "type": "LoadBalancer", "selector": { "app": "web" }, "ports": [{ "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" }] },
    });
    send(api, "POST", services, "application/json", &service)?;
    let created = format!("{services}/{CREATED_SERVICE}");
    wait(processes, "the created Service's load balancer", |_| {
        Ok(has_ingress(&get(api, &created)?.1))
    })?;
    // A changed port makes the service controller ensure the load balancer
    // again: the same events repeat, which the recorder sends as patches.
    let port = json!({ "spec": { "ports": [{ "name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP" }] } });
    send(
        api,
        "PATCH",
        &created,
        "application/merge-patch+json",
        &port,
    )?;
    wait(processes, "a repeated event on the changed Service", |_| {
        let (_, events) = get(api, "/apis/events.k8s.io/v1/namespaces/default/events")?;
        Ok(events["items"].as_array().into_iter().flatten().any(|e| {
            e["regarding"]["name"] == CREATED_SERVICE
                && e["series"]["count"].as_i64().unwrap_or(0) >= 2
        }))
    })?;
    let deleted = format!("{services}/{DELETED_SERVICE}");
    send(api, "DELETE", &deleted, "application/json", &json!({}))?;
    wait(
        processes,
        "the deleted Service's load balancer removed and the Service gone",
        |_| Ok(get(api, &deleted)?.0 == 404),
    )
}

fn exercise_lifecycle(processes: &mut Processes, api: SocketAddr) -> anyhow::Result<()> {
    let ready = |status: &str| json!([{ "type": "Ready", "status": status, "reason": "KubeletReady", "message": "set by xtask chart" }]);
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": GONE_NODE },
        "spec": { "providerID": format!("fake://elsewhere/{GONE_NODE}") },
        "status": { "conditions": ready("True") },
    });
    send(api, "POST", "/api/v1/nodes", "application/json", &node)?;
    let path = format!("/api/v1/nodes/{GONE_NODE}");
    let started = Instant::now();
    while started.elapsed() < SEEN_READY {
        processes.check_alive()?;
        ensure!(
            get(api, &path)?.0 == 200,
            "{GONE_NODE} was deleted while Ready"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let not_ready = json!({ "status": { "conditions": ready("False") } });
    send(
        api,
        "PATCH",
        &format!("{path}/status"),
        "application/strategic-merge-patch+json",
        &not_ready,
    )?;
    wait(
        processes,
        "the NotReady node without an instance deleted",
        |_| Ok(get(api, &path)?.0 == 404),
    )
}

/// Polls `done` every half second until it holds; fails after
/// [`STEP_TIMEOUT`] or when a process dies. `done` may describe progress.
fn wait(
    processes: &mut Processes,
    what: &str,
    mut done: impl FnMut(&mut String) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut progress = String::new();
    let mut last_error = None;
    while started.elapsed() < STEP_TIMEOUT {
        processes.check_alive()?;
        match done(&mut progress) {
            Ok(true) => {
                println!("scenario: {what} ({:.1}s)", started.elapsed().as_secs_f64());
                return Ok(());
            }
            Ok(false) => {}
            Err(err) => last_error = Some(err),
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let detail = match (progress.is_empty(), last_error) {
        (false, _) => progress,
        (true, Some(err)) => format!("{err:#}"),
        (true, None) => "no progress".to_owned(),
    };
    bail!("scenario: not done after {STEP_TIMEOUT:?}: {what}; {detail}")
}

fn get(api: SocketAddr, path: &str) -> anyhow::Result<(u16, Value)> {
    let response = http::get(api, path)?;
    let body = serde_json::from_str(&response.body).unwrap_or(Value::Null);
    Ok((response.status, body))
}

fn send(
    api: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> anyhow::Result<()> {
    let response = http::request(api, method, path, Some((content_type, &body.to_string())))?;
    ensure!(
        (200..300).contains(&response.status),
        "{method} {path}: HTTP {}: {}",
        response.status,
        response.body
    );
    Ok(())
}

fn has_ingress(service: &Value) -> bool {
    service["status"]["loadBalancer"]["ingress"]
        .as_array()
        .is_some_and(|i| !i.is_empty())
}

/// The CCM's requests from the server's log.
fn traffic(api: SocketAddr) -> anyhow::Result<Traffic> {
    let (status, log) = get(api, "/testapi/requests")?;
    ensure!(status == 200, "GET /testapi/requests: HTTP {status}");
    let dropped = log["dropped"].as_u64().unwrap_or(0);
    ensure!(
        dropped == 0,
        "the request log dropped {dropped} records: the check would miss requests"
    );
    let records = log["records"]
        .as_array()
        .context("the request log has no records")?;
    let text = |r: &Value, key: &str| r[key].as_str().unwrap_or_default().to_owned();
    let mut traffic = Traffic {
        resources: Vec::new(),
        non_resource: Vec::new(),
    };
    for record in records.iter().filter(|r| r["user_agent"] != XTASK_AGENT) {
        if text(record, "resource").is_empty() {
            traffic.non_resource.push(text(record, "path"));
        } else {
            traffic.resources.push(Request {
                verb: text(record, "verb"),
                group: text(record, "group"),
                resource: text(record, "resource"),
                subresource: text(record, "subresource"),
                namespace: text(record, "namespace"),
                name: text(record, "name"),
            });
        }
    }
    ensure!(
        !traffic.resources.is_empty(),
        "the request log holds no request from the CCM"
    );
    Ok(traffic)
}

/// The CCM's arguments as the chart renders them, less those that say where
/// it listens and where its cloud config is: the scenario supplies those.
pub(crate) fn local_args(rendered: &[String]) -> Vec<String> {
    rendered
        .iter()
        .filter(|a| {
            !["--cloud-config=", "--bind-address=", "--secure-port="]
                .iter()
                .any(|p| a.starts_with(p))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_and_config_flags_are_replaced_and_the_rest_kept() {
        let rendered: Vec<String> = [
            "--cloud-provider=fake",
            "--cloud-config=/etc/x",
            "--leader-elect=true",
            "--bind-address=0.0.0.0",
            "--secure-port=10258",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            local_args(&rendered),
            ["--cloud-provider=fake", "--leader-elect=true"]
        );
    }
}
