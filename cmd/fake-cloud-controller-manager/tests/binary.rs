//! The real binary as an operator runs it: bad input, health, readiness,
//! metrics, signals and leadership, against the test API server.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");

/// Runs the binary to completion and returns its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BINARY)
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_usage_error(args: &[&str], expected: &str) {
    let (code, stderr) = run(args);
    assert_eq!(code, Some(64), "{args:?} should exit 64; stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(expected),
        "{args:?}: `{stderr}` does not mention `{expected}`"
    );
}

#[test]
fn bad_input_exits_64_with_one_line_naming_what_and_where() {
    assert_usage_error(&["--node-monitor-period=5x"], "--node-monitor-period");
    assert_usage_error(&["--no-such-flag"], "--no-such-flag");
    assert_usage_error(
        &["--cloud-config=/nonexistent/cloud.toml"],
        "--cloud-config /nonexistent/cloud.toml: cannot read it",
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cloud.toml");
    std::fs::write(&config, "[settings]\nlatency_ms = 1\nbatch_sise = 5\n").unwrap();
    let flag = format!("--cloud-config={}", config.display());
    assert_usage_error(
        &[&flag],
        &format!("{}:3: settings.batch_sise: unknown field", config.display()),
    );
    assert_usage_error(
        &["--cloud-provider=aws"],
        "this binary runs the `fake` provider",
    );
    assert_usage_error(
        &[],
        "--cluster-cidr is required: --configure-cloud-routes is true and the fake provider has routes",
    );
}

#[test]
fn version_and_help_exit_zero() {
    let out = Command::new(BINARY).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("fake-cloud-controller-manager "));
    let out = Command::new(BINARY).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--leader-elect-lease-duration"));
}

/// A running CCM, killed if a test fails before stopping it.
struct Ccm {
    child: Child,
    metrics: String,
}

impl Ccm {
    fn start(kubeconfig: &Path, extra: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(BINARY)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--cluster-cidr=10.244.0.0/16",
                "--bind-address=127.0.0.1",
                &format!("--secure-port={port}"),
                "--leader-elect-lease-duration=3s",
                "--leader-elect-renew-deadline=2s",
                "--leader-elect-retry-period=500ms",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        Self {
            child,
            metrics: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let response = reqwest::get(format!("{}{path}", self.metrics)).await.ok()?;
        Some((response.status().as_u16(), response.text().await.ok()?))
    }

    async fn wait_for(&self, path: &str, what: impl Fn(u16, &str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((status, body)) = self.get(path).await
                && what(status, &body)
            {
                return body;
            }
            assert!(Instant::now() < deadline, "timed out waiting on {path}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the CCM did not exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn lease_holder(server: &TestApiServer) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    leases
        .get_opt("cloud-controller-manager")
        .await
        .unwrap()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn serves_health_readiness_and_metrics_and_releases_the_lease_on_sigterm() {
    let server = TestApiServer::start().await.unwrap();
    let mut ccm = Ccm::start(server.kubeconfig_path(), &[]);

    ccm.wait_for("/readyz", |status, _| status == 200).await;
    assert_eq!(ccm.get("/healthz").await.unwrap().0, 200);
    assert_eq!(ccm.get("/livez").await.unwrap().0, 200);
    let metrics = ccm
        .wait_for("/metrics", |_, body| {
            body.contains("ccm_controller_running")
        })
        .await;
    for controller in ["cloud-node", "cloud-node-lifecycle", "service", "route"] {
        assert!(
            metrics.contains(&format!(
                "ccm_controller_running{{controller=\"{controller}\"}} 1"
            )),
            "{metrics}"
        );
    }
    assert!(
        metrics.contains("# TYPE ccm_controller_reconciles counter"),
        "{metrics}"
    );
    assert!(metrics.ends_with("# EOF\n"));
    // The route controller's first pass listed the cloud's routes: provider
    // calls are counted by operation and outcome, whatever the provider.
    ccm.wait_for("/metrics", |_, body| {
        body.contains(
            r#"ccm_cloud_provider_calls_total{operation="list_routes",outcome="success"}"#,
        )
    })
    .await;
    // Four controllers, one watch per kind.
    let stats = server.stats();
    assert_eq!(stats.open_watches_on("nodes"), 1, "{stats:?}");
    assert_eq!(stats.open_watches_on("services"), 1, "{stats:?}");
    let agents: std::collections::BTreeSet<String> = server
        .requests()
        .into_iter()
        .map(|r| {
            if r.resource == "leases" {
                format!("lease:{}", r.user_agent)
            } else {
                r.user_agent
            }
        })
        .collect();
    assert!(
        agents.contains("fake-cloud-controller-manager/0.1.0"),
        "{agents:?}"
    );
    assert!(
        agents.contains("lease:fake-cloud-controller-manager/0.1.0/leader-election"),
        "{agents:?}"
    );
    assert!(
        agents
            .iter()
            .all(|a| a.contains("fake-cloud-controller-manager/0.1.0")),
        "{agents:?}"
    );
    assert!(lease_holder(&server).await.is_some(), "it leads");

    ccm.terminate();
    let status = ccm.wait_exit().await;
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
    assert_eq!(lease_holder(&server).await, None, "the lease was released");
}

#[tokio::test]
async fn readyz_reports_not_ready_until_the_caches_are_filled() {
    let server = TestApiServer::start().await.unwrap();
    // Node lists fail: the leader cannot fill its caches.
    server.fail_next(
        RequestMatch::verb(Verb::List).resource("nodes"),
        Failure::internal_error(),
        1_000_000,
    );
    let ccm = Ccm::start(server.kubeconfig_path(), &[]);
    let body = ccm
        .wait_for("/readyz", |status, body| {
            status == 503 && body.contains("filling caches")
        })
        .await;
    assert!(body.starts_with("not ready"));
    server.clear_faults();
    ccm.wait_for("/readyz", |status, _| status == 200).await;
}

#[tokio::test]
async fn losing_the_lease_exits_non_zero() {
    let server = TestApiServer::start().await.unwrap();
    let mut ccm = Ccm::start(server.kubeconfig_path(), &[]);
    ccm.wait_for("/readyz", |status, _| status == 200).await;
    // Renewals fail from now on: within the renew deadline it must stop.
    server.fail_next(
        RequestMatch::any().resource("leases"),
        Failure::internal_error(),
        1_000_000,
    );
    let status = ccm.wait_exit().await;
    assert_eq!(
        status.code(),
        Some(1),
        "leadership lost is a failure, as upstream"
    );
}

#[tokio::test]
async fn a_backlog_of_writes_never_delays_lease_renewals() {
    // 200 nodes to initialize at five writes per second: 80 s of queued
    // writes, far past the 2 s renew deadline. Lease renewals (two a second
    // here) have their own client and budget.
    let server = TestApiServer::builder()
        .seed_nodes(200)
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cloud.toml");
    std::fs::write(&config, "[settings]\nauto_instances = true\n").unwrap();
    let mut ccm = Ccm::start(
        server.kubeconfig_path(),
        &[
            "--kube-api-qps=5",
            "--kube-api-burst=5",
            &format!("--cloud-config={}", config.display()),
        ],
    );
    ccm.wait_for("/readyz", |status, _| status == 200).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(
        ccm.child.try_wait().unwrap().is_none(),
        "still running, still leading after 4 renew deadlines"
    );
    let renewals = server
        .requests()
        .iter()
        .filter(|r| r.resource == "leases" && r.verb == "update")
        .count();
    assert!(
        renewals >= 8,
        "the lease kept being renewed: {renewals} updates"
    );
}
