//! The chart's RBAC proven by running under it: the
//! fake-cloud-controller-manager, run with the arguments the chart renders
//! as the chart's ServiceAccount, against the test API server in RBAC mode
//! with the chart's rendered RBAC applied, through a scenario that makes
//! every controller act. With the admission webhook on, it also serves the
//! webhook and, with self-managed certificates, issues them into the
//! chart's Secret and configuration.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::rbac::Request;
use super::webhook::Certificates;
use crate::cmd::target_dir;
use crate::http;
use crate::processes::Processes;
use crate::sandbox::status::Status;
use args::{local_args, serves_webhook};

mod args;
mod standby;

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
/// The static tokens of the API server's `--token-auth-file` (loopback,
/// throw-away): xtask's own, in `system:masters`, and the CCM's.
const ADMIN_TOKEN: &str = "xtask-chart-admin";
const CCM_TOKEN: &str = "xtask-chart-ccm";
/// The user a request without a token is.
const ANONYMOUS: &str = "system:anonymous";
/// What the CCM's user agent holds (`<provider>-cloud-controller-manager/<version>`).
const CCM_AGENT: &str = "-cloud-controller-manager/";
/// The RBAC kinds of a render, with the API path of their collection
/// (`{ns}`: the object's namespace).
const KINDS: [(&str, &str); 5] = [
    ("ServiceAccount", "/api/v1/namespaces/{ns}/serviceaccounts"),
    (
        "ClusterRole",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    ),
    (
        "ClusterRoleBinding",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    ),
    (
        "Role",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    ),
    (
        "RoleBinding",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    ),
];

/// The chart's ServiceAccount and RBAC objects, as rendered.
#[derive(Debug)]
pub(crate) struct ChartRbac {
    /// The ServiceAccounts, roles and bindings of the render.
    pub(crate) objects: Vec<Value>,
    /// The ServiceAccount the workload runs as, and its namespace.
    pub(crate) account: String,
    pub(crate) namespace: String,
}

impl ChartRbac {
    /// The RBAC kinds among `docs`, for the workload's `account`.
    pub(crate) fn from_render(docs: &[Value], namespace: &str, account: &str) -> Self {
        Self {
            objects: docs
                .iter()
                .filter(|d| KINDS.iter().any(|(kind, _)| d["kind"] == *kind))
                .cloned()
                .collect(),
            account: account.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    /// The user kube-apiserver authenticates the ServiceAccount's tokens as.
    fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.account)
    }

    /// `--token-auth-file`: xtask in `system:masters` (first, so the
    /// server's kubeconfig is xtask's), the CCM as the ServiceAccount with
    /// the groups a ServiceAccount token gives.
    fn token_file(&self) -> String {
        let ns = &self.namespace;
        format!(
            "{ADMIN_TOKEN},xtask,xtask,\"system:masters\"\n\
             {CCM_TOKEN},{},{}-uid,\"system:serviceaccounts,system:serviceaccounts:{ns}\"\n",
            self.user(),
            self.account
        )
    }
}

/// What the CCM sent, by the API server's request log and the CCM's log.
#[derive(Debug)]
pub(crate) struct Traffic {
    /// The resource requests the API server granted the ServiceAccount.
    pub(crate) resources: Vec<Request>,
    /// Requests the API server refused (403), and lines of the CCM's log
    /// reporting a refusal.
    pub(crate) refused: Vec<String>,
    /// Requests with the CCM's user agent that carried no token: they would
    /// pass as xtask's and prove nothing.
    pub(crate) anonymous: Vec<String>,
}

/// Runs the scenario with the test API server in RBAC mode holding `rbac`
/// (and `certificates`, the webhook's objects the CCM fills, when it keeps
/// its own), and the CCM started as its ServiceAccount with `rendered` (the
/// chart's arguments, its endpoints moved to loopback: [`local_args`]) and
/// `cloud_config`; returns what it sent.
pub(crate) fn run_scenario(
    rendered: &[String],
    cloud_config: &str,
    rbac: &ChartRbac,
    certificates: Option<&Certificates>,
) -> anyhow::Result<Traffic> {
    crate::processes::build_sandbox_binaries()?;
    let target = target_dir();
    let dir = target.join("chart-rbac");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kubeconfig = dir.join("kubeconfig");
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, rbac.token_file())?;
    let cloud_config_path = dir.join("cloud.conf");
    std::fs::write(&cloud_config_path, cloud_config)?;
    let webhook_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut args = local_args(rendered, webhook_port);
    args.push(format!("--cloud-config={}", cloud_config_path.display()));
    let webhook = serves_webhook(&args).then(|| SocketAddr::from(([127, 0, 0, 1], webhook_port)));

    let mut processes = Processes::new(&dir);
    let api = processes.start_api_server_with(
        &target.join("debug/test-apiserver"),
        &kubeconfig,
        SEED_NODES,
        SEED_SERVICES,
        &[
            format!("--token-auth-file={}", tokens.display()),
            "--authorization-mode=RBAC".to_owned(),
        ],
    )?;
    apply(api, rbac)?;
    if let Some(certificates) = certificates {
        certificates.create(api, ADMIN_TOKEN)?;
    }
    let lease = standby::leader_lease(&args);
    if let Some(lease) = &lease {
        standby::previous_leader(api, lease, ADMIN_TOKEN)?;
    }
    crate::sandbox::volumes::seed(api, Some(ADMIN_TOKEN))?;
    let ccm_kubeconfig = dir.join("kubeconfig-ccm");
    std::fs::write(&ccm_kubeconfig, token_kubeconfig(api, CCM_TOKEN))?;
    let metrics = processes.start_ccm_with(
        &target.join("debug/fake-cloud-controller-manager"),
        &ccm_kubeconfig,
        &args,
    )?;
    println!(
        "scenario: API server {api} in RBAC mode, the CCM as {}; logs in {}",
        rbac.user(),
        dir.display()
    );
    if let Some(lease) = &lease {
        standby::hand_over(api, &rbac.user(), lease, ADMIN_TOKEN)?;
    }

    let driven = drive(&mut processes, api, metrics, &dir, webhook, certificates);
    let traffic = traffic(api, &rbac.user(), &dir);
    match (driven, traffic) {
        (Ok(()), traffic) => traffic,
        (Err(err), Ok(traffic)) if !traffic.refused.is_empty() => bail!(
            "{err:#}\nthe API server refused the CCM under the chart's RBAC (403):\n  {}",
            first_lines(&traffic.refused)
        ),
        (Err(err), _) => Err(err),
    }
}

/// Waits for the webhook (at `webhook`, when served) and its certificates
/// (when the CCM keeps its own), makes every controller act, then stops
/// the CCM.
fn drive(
    processes: &mut Processes,
    api: SocketAddr,
    metrics: SocketAddr,
    dir: &Path,
    webhook: Option<SocketAddr>,
    certificates: Option<&Certificates>,
) -> anyhow::Result<()> {
    if let Some(certificates) = certificates {
        wait(
            processes,
            "the webhook's CA and certificate in the chart's Secret, the CA in its configuration",
            |last| {
                Ok(certificates
                    .issued(api)
                    .map_err(|missing| *last = format!("{missing:#}"))
                    .is_ok())
            },
        )?;
    }
    if let Some(webhook) = webhook {
        wait(processes, "the webhook served over HTTPS", |_| {
            Ok(http::get_https(webhook, "/validate-service").is_ok())
        })?;
    }
    wait(
        processes,
        "every node initialized and routed, every load balancer provisioned, every volume labelled",
        |last| {
            let status = Status::read(api, metrics)?;
            *last = status.line();
            Ok(status.complete())
        },
    )?;
    exercise_services(processes, api)?;
    exercise_lifecycle(processes, api)?;
    // SIGTERM: the CCM releases its Lease on the way out.
    let exit = processes.stop("fake-cloud-controller-manager")?;
    ensure!(
        exit.success(),
        "the CCM exited with {exit} on SIGTERM; see {}",
        dir.join("ccm.log").display()
    );
    Ok(())
}

/// Creates the chart's objects as xtask (`system:masters`), then binds
/// `cluster-admin` to `system:anonymous`: xtask's own requests (the
/// scenario's, the sandbox's status, the CCM's `/metrics`, whose
/// SubjectAccessReview the CCM then makes under the chart's
/// `system:auth-delegator` binding) carry no token. The CCM's do, and a
/// token that does not authenticate is 401, never anonymous.
fn apply(api: SocketAddr, rbac: &ChartRbac) -> anyhow::Result<()> {
    let anonymous_admin = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": "xtask:anonymous-is-xtask" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ANONYMOUS }],
    });
    for object in rbac.objects.iter().chain([&anonymous_admin]) {
        let kind = object["kind"].as_str().unwrap_or_default();
        let (_, collection) = KINDS
            .iter()
            .find(|(k, _)| *k == kind)
            .with_context(|| format!("no API path for kind {kind}"))?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(&rbac.namespace);
        let path = collection.replace("{ns}", namespace);
        let response = http::request_as(
            api,
            "POST",
            &path,
            Some(("application/json", &object.to_string())),
            Some(ADMIN_TOKEN),
        )?;
        ensure!(
            response.status == 201,
            "creating {kind} {}: HTTP {}: {}",
            object["metadata"]["name"],
            response.status,
            response.body
        );
    }
    Ok(())
}

/// A kubeconfig for the API server at `api` sending `token`.
fn token_kubeconfig(api: SocketAddr, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: chart\n  cluster:\n    server: http://{api}\n\
         users:\n- name: ccm\n  user:\n    token: {token}\n\
         contexts:\n- name: chart\n  context:\n    cluster: chart\n    user: ccm\n\
         current-context: chart\n"
    )
}

/// The first 20 of `lines`, one per line, and how many more there are.
pub(crate) fn first_lines(lines: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut text = lines
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n  ");
    if lines.len() > SHOWN {
        text.push_str(&format!("\n  ({} more)", lines.len() - SHOWN));
    }
    text
}

/// The lines of a CCM log that report an answer 403 Forbidden (as
/// `ccm-test-support` reads them).
fn forbidden_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("forbidden") || lower.contains("code: 403")
        })
        .collect()
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

/// The requests of the CCM (`user`) from the server's request log, and
/// the refusals in the CCM's log in `dir`.
fn traffic(api: SocketAddr, user: &str, dir: &Path) -> anyhow::Result<Traffic> {
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
    let shown = |r: &Value| {
        let query = text(r, "query");
        let query = if query.is_empty() {
            query
        } else {
            format!("?{query}")
        };
        format!(
            "{} {}{query} (user {}, {})",
            text(r, "method"),
            text(r, "path"),
            text(r, "user"),
            text(r, "user_agent")
        )
    };
    let mut traffic = Traffic {
        resources: Vec::new(),
        refused: Vec::new(),
        anonymous: Vec::new(),
    };
    for record in records {
        if record["user"] == ANONYMOUS && text(record, "user_agent").contains(CCM_AGENT) {
            traffic.anonymous.push(shown(record));
        }
        if record["user"] != user {
            continue;
        }
        if record["status"] == 403 {
            traffic.refused.push(shown(record));
        } else if !text(record, "resource").is_empty() {
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
    let log = std::fs::read_to_string(dir.join("ccm.log")).unwrap_or_default();
    traffic.refused.extend(
        forbidden_lines(&log)
            .into_iter()
            .map(|l| format!("in the CCM's log: {l}")),
    );
    ensure!(
        !traffic.resources.is_empty(),
        "the request log holds no request from the CCM as {user}"
    );
    Ok(traffic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_makes_xtask_an_administrator_and_the_ccm_its_service_account() {
        let docs = [
            json!({ "kind": "ServiceAccount", "metadata": { "name": "ccm", "namespace": "kube-system" } }),
            json!({ "kind": "Deployment", "metadata": { "name": "ccm" } }),
            json!({ "kind": "ClusterRole", "metadata": { "name": "ccm" } }),
        ];
        let rbac = ChartRbac::from_render(&docs, "kube-system", "ccm");
        assert_eq!(rbac.objects.len(), 2, "the Deployment is not applied");
        assert_eq!(
            rbac.token_file(),
            format!(
                "{ADMIN_TOKEN},xtask,xtask,\"system:masters\"\n\
                 {CCM_TOKEN},system:serviceaccount:kube-system:ccm,ccm-uid,\
                 \"system:serviceaccounts,system:serviceaccounts:kube-system\"\n"
            )
        );
    }
}
