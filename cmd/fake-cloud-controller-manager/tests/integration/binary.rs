//! The real binary as an operator runs it: bad input, health, readiness,
//! metrics, signals and leadership, against the test API server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ccm_test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};
use ccm_test_support::{Ccm, Launch, eventually, unique};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
/// How long any one outcome may take.
const WAIT: Duration = Duration::from_secs(20);

/// The binary with `args`, logging to a file of its own.
fn launch(args: &[&str]) -> Launch {
    let log =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}.log", unique("fake-ccm")));
    Launch::new(BINARY, log).args(args.iter().copied())
}

/// Runs the binary to completion and returns its exit code, stdout and
/// stderr.
async fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = launch(args).output().await.expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn assert_usage_error(args: &[&str], expected: &str) {
    let (code, _, stderr) = run(args).await;
    assert_eq!(code, Some(64), "{args:?} should exit 64; stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(expected),
        "{args:?}: `{stderr}` does not mention `{expected}`"
    );
}

#[tokio::test]
async fn bad_input_exits_64_with_one_line_naming_what_and_where() {
    assert_usage_error(&["--node-monitor-period=5x"], "--node-monitor-period").await;
    assert_usage_error(&["--no-such-flag"], "--no-such-flag").await;
    assert_usage_error(
        &["--v=2", "audit"],
        "`audit` is a subcommand: put it first, before any flag",
    )
    .await;
    assert_usage_error(&["audit", "--delete"], "add --yes to confirm").await;
    assert_usage_error(&["audit", "--output=yaml"], "--output=`yaml`").await;
    // Longer than Go's durations: upstream refuses it too; it once made the
    // route and service controllers panic on a clock overflow.
    for flag in ["--route-reconciliation-period", "--node-sync-period"] {
        assert_usage_error(&[&format!("{flag}=5000000000000000h")], flag).await;
    }
    assert_usage_error(
        &["--cloud-config=/nonexistent/cloud.toml"],
        "--cloud-config /nonexistent/cloud.toml: cannot read it",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cloud.toml");
    std::fs::write(&config, "[settings]\nlatency_ms = 1\nbatch_sise = 5\n").unwrap();
    let flag = format!("--cloud-config={}", config.display());
    assert_usage_error(
        &[&flag],
        &format!("{}:3: settings.batch_sise: unknown field", config.display()),
    )
    .await;
    assert_usage_error(
        &["--cloud-provider=aws"],
        "this binary runs the `fake` provider",
    )
    .await;
    assert_usage_error(
        &[],
        "--cluster-cidr is required: --configure-cloud-routes is true and the fake provider has routes",
    )
    .await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    assert_usage_error(
        &[
            "--cluster-cidr=10.0.0.0/8",
            "--master=http://127.0.0.1:1",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--tls-cert-file=/nonexistent/tls.crt",
            "--tls-private-key-file=/nonexistent/tls.key",
        ],
        "--tls-cert-file /nonexistent/tls.crt: cannot read it",
    )
    .await;
}

#[tokio::test]
async fn version_and_help_exit_zero() {
    let (code, stdout, _) = run(&["--version"]).await;
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("fake-cloud-controller-manager "));
    // A plain cargo build is told no commit or date; the compiler it knows.
    assert!(
        stdout.contains("(provider fake; commit unknown; built unknown; rustc "),
        "{stdout}"
    );
    let (code, stdout, _) = run(&["--version=raw"]).await;
    assert_eq!(code, Some(0));
    let raw: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(raw["gitVersion"], format!("v{}", env!("CARGO_PKG_VERSION")));
    assert_eq!(raw["compiler"], "rustc");
    let (code, stdout, _) = run(&["--help"]).await;
    assert_eq!(code, Some(0));
    assert!(stdout.contains("--leader-elect-lease-duration"));
}

/// The binary against `kubeconfig` with a route CIDR, a short lease and
/// `extra` flags.
fn with_server(kubeconfig: &Path, extra: &[&str]) -> Launch {
    let kubeconfig = format!("--kubeconfig={}", kubeconfig.display());
    launch(&[
        &kubeconfig,
        "--cluster-cidr=10.244.0.0/16",
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
    ])
    .args(extra.iter().copied())
}

/// [`with_server`] started, leading and ready.
async fn start(kubeconfig: &Path, extra: &[&str]) -> Ccm {
    with_server(kubeconfig, extra)
        .start()
        .await
        .expect("the CCM leads and is ready")
}

/// Waits until `GET path` answers what `wanted` accepts; answers the body.
async fn wait_for(ccm: &Ccm, path: &str, wanted: impl Fn(u16, &str) -> bool) -> String {
    eventually(path, WAIT, || async {
        ccm.get(path)
            .await
            .ok()
            .filter(|(status, body)| wanted(*status, body))
            .map(|(_, body)| body)
    })
    .await
    .expect("a bounded wait")
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

/// Waits for the `LeaderElection` Event `<holder> <what>` on the Lease, as
/// client-go's leader election records it; returns the uid it refers to.
async fn leader_election_event(server: &TestApiServer, holder: &str, what: &str) -> Option<String> {
    let events: Api<Event> = Api::namespaced(server.client(), "kube-system");
    let note = format!("{holder} {what}");
    eventually(&format!("the Event `{note}`"), WAIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("LeaderElection")
                    && e.type_.as_deref() == Some("Normal")
                    && e.note.as_deref() == Some(note.as_str())
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Lease")
            })
            .map(|e| e.regarding.and_then(|r| r.uid))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn serves_health_readiness_and_metrics_and_releases_the_lease_on_sigterm() {
    let server = TestApiServer::start().await.unwrap();
    let mut ccm = start(server.kubeconfig_path(), &[]).await;

    assert_eq!(ccm.get("/healthz").await.unwrap().0, 200);
    assert_eq!(ccm.get("/livez").await.unwrap().0, 200);
    let metrics = wait_for(&ccm, "/metrics", |_, body| {
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
    // Upstream's debugging endpoints, behind the same guard as /metrics.
    let (status, configz) = ccm.get("/configz").await.unwrap();
    assert_eq!(status, 200, "{configz}");
    // Since 1.36 the section carries its kind and apiVersion before `Generic`.
    let configz: serde_json::Value = serde_json::from_str(&configz).expect("JSON");
    let section = &configz["cloudcontrollermanager.config.k8s.io"];
    assert_eq!(
        section["kind"], "CloudControllerManagerConfiguration",
        "{configz}"
    );
    assert!(section["Generic"].is_object(), "{configz}");
    let (status, index) = ccm.get("/debug/pprof/").await.unwrap();
    assert_eq!(status, 200, "{index}");
    assert!(index.contains("profile"), "{index}");
    // The route controller's first pass listed the cloud's routes: provider
    // calls are counted by operation and outcome, whatever the provider.
    wait_for(&ccm, "/metrics", |_, body| {
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
            } else if r.verb == "list" || r.verb == "watch" {
                format!("{} {}", r.verb, r.user_agent)
            } else {
                r.user_agent
            }
        })
        .collect();
    // The informers list and watch with a client of their own, as
    // upstream's shared-informers.
    for verb in ["list", "watch"] {
        assert!(
            agents.contains(&format!(
                "{verb} fake-cloud-controller-manager/0.1.0/shared-informers"
            )),
            "{agents:?}"
        );
    }
    assert!(
        agents
            .iter()
            .filter(|a| a.starts_with("list ") || a.starts_with("watch "))
            .all(|a| a.ends_with("/shared-informers")),
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
    let holder = lease_holder(&server).await.expect("it leads");
    // As upstream's: the handover is recorded on the Lease.
    let lease: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease_uid = lease
        .get("cloud-controller-manager")
        .await
        .unwrap()
        .metadata
        .uid;
    assert!(lease_uid.is_some());
    assert_eq!(
        leader_election_event(&server, &holder, "became leader").await,
        lease_uid
    );

    ccm.terminate().await.unwrap();
    let status = ccm.wait(WAIT).await.unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
    assert_eq!(lease_holder(&server).await, None, "the lease was released");
    assert_eq!(
        leader_election_event(&server, &holder, "stopped leading").await,
        lease_uid
    );
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
    let ccm = with_server(server.kubeconfig_path(), &[])
        .spawn()
        .expect("the binary starts");
    let body = wait_for(&ccm, "/readyz", |status, body| {
        status == 500 && body.contains("[-]informer-sync failed: reason withheld\n")
    })
    .await;
    assert!(body.ends_with("readyz check failed\n"), "{body}");
    // The check's own path says why (the test API server allows anyone).
    let (status, reason) = ccm.get("/readyz/informer-sync").await.unwrap();
    assert_eq!(
        (status, reason.as_str()),
        (
            500,
            "internal server error: the controllers' caches are filling\n"
        )
    );
    server.clear_faults();
    wait_for(&ccm, "/readyz", |status, _| status == 200).await;
}

#[tokio::test]
async fn losing_the_lease_exits_non_zero() {
    let server = TestApiServer::start().await.unwrap();
    let mut ccm = start(server.kubeconfig_path(), &[]).await;
    // Renewals fail from now on: within the renew deadline it must stop.
    server.fail_next(
        RequestMatch::any().resource("leases"),
        Failure::internal_error(),
        1_000_000,
    );
    let status = ccm.wait(WAIT).await.unwrap();
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
    let mut ccm = start(
        server.kubeconfig_path(),
        &[
            "--kube-api-qps=5",
            "--kube-api-burst=5",
            &format!("--cloud-config={}", config.display()),
        ],
    )
    .await;
    // Eight renewals: four renew deadlines' worth of writes queued behind.
    let renewals = eventually("eight lease renewals", Duration::from_secs(30), || async {
        let renewals = server
            .requests()
            .iter()
            .filter(|r| r.resource == "leases" && r.verb == "update")
            .count();
        (renewals >= 8).then_some(renewals)
    })
    .await
    .expect("the lease kept being renewed");
    assert!(
        ccm.exited().unwrap().is_none(),
        "still running, still leading after {renewals} renewals"
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.resource == "nodes" && r.verb == "patch"),
        "the backlog of node writes was draining meanwhile"
    );
}

#[tokio::test]
async fn a_panicking_controller_stops_the_process_naming_it_and_releases_the_lease() {
    let server = TestApiServer::start().await.unwrap();
    let mut ccm = start(server.kubeconfig_path(), &[]).await;
    assert!(lease_holder(&server).await.is_some(), "it leads");

    // The fake provider panics on this Service's load balancer: a provider
    // bug inside the service controller's reconcile.
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "boom",
            "namespace": "default",
            "annotations": {
                "service.beta.kubernetes.io/fake-load-balancer-panic": "a provider bug"
            },
        },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }] },
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(server.client(), "default")
        .create(&kube::api::PostParams::default(), &service)
        .await
        .unwrap();

    let status = ccm.wait(WAIT).await.expect("the process stops by itself");
    assert_eq!(
        status.code(),
        Some(1),
        "a non-zero exit: {}",
        ccm.log_tail()
    );
    let log = ccm.log();
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("fake-cloud-controller-manager: controller service panicked: ")
            && last.contains("a provider bug"),
        "the last line names the controller and the panic: {last}"
    );
    assert_eq!(
        lease_holder(&server).await,
        None,
        "the lease was released, so a standby takes over at once"
    );
}

#[tokio::test]
async fn readyz_fails_while_a_watch_makes_no_progress() {
    let server = TestApiServer::start().await.unwrap();
    let ccm = start(server.kubeconfig_path(), &[]).await;
    assert_eq!(ccm.get("/readyz").await.unwrap().0, 200);

    // Every node watch fails from now on, and the open one is cut.
    server.fail_next(
        RequestMatch::verb(Verb::Watch).resource("nodes"),
        Failure::internal_error(),
        1_000_000,
    );
    server.close_all_watches();
    let body = wait_for(&ccm, "/readyz", |status, body| {
        status == 500 && body.contains("[-]watches failed: reason withheld\n")
    })
    .await;
    assert_eq!(
        body,
        "[+]ping ok\n[+]provider-initialized ok\n[+]informer-sync ok\n\
         [-]watches failed: reason withheld\nreadyz check failed\n",
        "the root path names no object and no error"
    );
    let (status, reason) = ccm.get("/readyz/watches").await.unwrap();
    assert_eq!(status, 500);
    assert!(
        reason.starts_with("internal server error: the Node watch makes no progress: "),
        "the check's own path says why: {reason}"
    );
    assert_eq!(
        ccm.get("/healthz").await.unwrap().0,
        200,
        "alive, only not ready"
    );

    // Once a watch succeeds again it is ready again, with no event: on a
    // quiet cluster none comes.
    server.clear_faults();
    let cleared = std::time::Instant::now();
    wait_for(&ccm, "/readyz", |status, _| status == 200).await;
    println!("ready {:?} after the faults cleared", cleared.elapsed());
}
