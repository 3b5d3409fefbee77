//! Logging as klog users expect, seen from outside the process: JSON lines
//! that parse one by one, a quiet `--v=0` once everything is in place, and
//! text without terminal escape codes when the log is a file.

use std::path::Path;
use std::time::Duration;

use ccm_test_support::{
    ApiServer, Ccm, Launch, UNINITIALIZED, eventually, ingress_ips, load_balancer_service,
    uninitialized_node, unique,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
/// Several of every periodic pass at the periods below.
const STEADY_WINDOW: Duration = Duration::from_secs(6);

async fn start(server: &ApiServer, dir: &Path, cluster: &str, extra: &[&str]) -> Ccm {
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
    let credentials = server.ccm_credentials("fake").await.unwrap();
    let mut launch = Launch::new(BINARY, dir.join("ccm.log"))
        .credentials(&credentials)
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            format!("--cluster-name={cluster}"),
            "--cluster-cidr=10.244.0.0/16".to_owned(),
            "--node-monitor-period=1s".to_owned(),
            "--node-status-update-frequency=1s".to_owned(),
            "--route-reconciliation-period=1s".to_owned(),
        ])
        .args(extra.iter().copied());
    if !credentials.rbac_limited {
        launch = launch.args([format!("--leader-elect-resource-name={cluster}")]);
    }
    launch.start().await.expect("the CCM starts and leads")
}

/// A node initialized and a load balancer with an ingress: the state the
/// quiet window starts from.
async fn settle(server: &ApiServer, cluster: &str) -> (String, String) {
    let node_name = format!("{cluster}-node");
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(&PostParams::default(), &uninitialized_node(&node_name))
        .await
        .unwrap();
    let service_name = format!("{cluster}-web");
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    services
        .create(
            &PostParams::default(),
            &load_balancer_service(&service_name, &[]),
        )
        .await
        .unwrap();
    eventually("node initialized and ingress set", WAIT, || async {
        let node = nodes.get(&node_name).await.ok()?;
        let tainted = node
            .spec?
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == UNINITIALIZED);
        let service = services.get(&service_name).await.ok()?;
        (!tainted && !ingress_ips(&service).is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    (node_name, service_name)
}

#[tokio::test]
async fn json_lines_parse_and_v0_says_nothing_per_object_in_a_steady_state() {
    let server = ApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = unique("logjson");
    let ccm = start(
        &server,
        dir.path(),
        &cluster,
        &["--logging-format=json", "--v=0"],
    )
    .await;
    let (node, service) = settle(&server, &cluster).await;
    // Let the last change's lines land, then watch a quiet window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = ccm.log().len();
    tokio::time::sleep(STEADY_WINDOW).await;
    let log = ccm.log();

    let mut lines = 0;
    for line in log.lines() {
        let object: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(object["ts"].as_f64().is_some(), "{line}");
        assert!(object["msg"].is_string(), "{line}");
        assert!(
            object["caller"]
                .as_str()
                .is_some_and(|c| c.contains(".rs:")),
            "{line}"
        );
        lines += 1;
    }
    assert!(lines > 3, "startup says something: {log}");
    assert!(
        log.contains("\"msg\":\"initialized\""),
        "a change to an object shows at --v=0: {log}"
    );
    let steady = &log[before..];
    assert!(
        !steady.contains(&node) && !steady.contains(&service),
        "per-object lines in a steady state at --v=0:\n{steady}"
    );
}

#[tokio::test]
async fn text_logs_written_to_a_file_carry_no_escape_codes() {
    let server = ApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = unique("logtext");
    let ccm = start(&server, dir.path(), &cluster, &["--v=2"]).await;
    settle(&server, &cluster).await;
    // The node's patch is seen before the CCM logs it: wait for the line.
    let log = eventually("the node's `initialized` line", WAIT, || async {
        let log = ccm.log();
        log.contains("initialized").then_some(log)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}:\n{}", ccm.log()));
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a log file:\n{log}"
    );
}
