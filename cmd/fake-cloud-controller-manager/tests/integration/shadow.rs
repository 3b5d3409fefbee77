//! `--dry-run` (shadow mode) beside a CCM that led before it: with the
//! load balancers already matching the Services, the shadow plans nothing
//! but "already in place"; after a Service's port changes, exactly one
//! "would change" for it; and it never mutates the cloud (the fake cloud
//! server's call log) nor writes to the API server (its request log).

use std::path::Path;
use std::time::Duration;

use ccm_provider_fake::{FakeCloud, FakeConfig};
use ccm_test_apiserver::TestApiServer;
use ccm_test_support::{
    ApiServer, Ccm, Launch, eventually, ingress_ips, kubeconfig_yaml, load_balancer_service,
    uninitialized_node, unique,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
const ADMIN_TOKEN: &str = "shadow-test-admin-token";
const SHADOW_TOKEN: &str = "shadow-test-shadow-token";
const SHADOW_USER: &str = "shadow";

async fn server(dir: &Path) -> TestApiServer {
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"\n{SHADOW_TOKEN},{SHADOW_USER},shadow-uid,\"system:masters\"\n"
        ),
    )
    .unwrap();
    TestApiServer::builder()
        .token_auth_file(&tokens)
        .kubeconfig_path(dir.join("kubeconfig"))
        .start()
        .await
        .unwrap()
}

/// The fake cloud as a server on loopback, as two CCMs share it.
async fn fake_cloud() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let cloud = FakeCloud::new(FakeConfig::default());
    cloud.set_auto_instances(true);
    tokio::spawn(ccm_provider_fake::server::serve(listener, cloud, 7));
    url
}

/// The fake cloud's call log, every call as the server reports it.
async fn calls(cloud: &str) -> Vec<Value> {
    reqwest::get(format!("{cloud}/calls"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn launch(dir: &Path, name: &str, kubeconfig: &Path, cloud: &str) -> Launch {
    let cloud_config = dir.join(format!("{name}.toml"));
    std::fs::write(&cloud_config, format!("[server]\nurl = \"{cloud}\"\n")).unwrap();
    Launch::new(BINARY, dir.join(format!("{name}.log")))
        .metrics_behind_authorization()
        .args([
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--cloud-config={}", cloud_config.display()),
            "--configure-cloud-routes=false".to_owned(),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/plan"
                .to_owned(),
        ])
}

/// A shadow (`--dry-run`) as the user [`SHADOW_USER`], whose requests the
/// API server's log tells apart from the leader's and the test's.
async fn start_shadow(dir: &Path, server: &TestApiServer, cloud: &str) -> Ccm {
    let kubeconfig = dir.join("shadow-kubeconfig");
    let yaml = kubeconfig_yaml(server.url(), None, SHADOW_USER, SHADOW_TOKEN);
    std::fs::write(&kubeconfig, yaml).unwrap();
    launch(dir, "shadow", &kubeconfig, cloud)
        .args(["--dry-run"])
        .start()
        .await
        .unwrap()
}

/// Every request but a GET the shadow's user sent the API server.
fn shadow_writes(server: &TestApiServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.user.as_deref() == Some(SHADOW_USER) && r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

async fn plan(ccm: &Ccm) -> Value {
    let (status, body) = ccm.get("/debug/plan").await.unwrap();
    assert_eq!(status, 200, "/debug/plan: {body}");
    serde_json::from_str(&body).unwrap()
}

fn entries_for<'a>(plan: &'a Value, verdict: &str) -> Vec<&'a Value> {
    plan["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["verdict"] == verdict)
        .collect()
}

#[tokio::test]
async fn a_shadow_plans_only_what_differs_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let cloud = fake_cloud().await;
    let nodes: Api<Node> = Api::all(server.client());
    for name in ["shadow-node-0", "shadow-node-1"] {
        nodes
            .create(&PostParams::default(), &uninitialized_node(name))
            .await
            .unwrap();
    }
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    for name in ["web", "db"] {
        services
            .create(&PostParams::default(), &load_balancer_service(name, &[]))
            .await
            .unwrap();
    }

    // The CCM that leads builds everything, then steps aside.
    let leader = launch(dir.path(), "leader", server.kubeconfig_path(), &cloud)
        .start()
        .await
        .unwrap();
    for name in ["web", "db"] {
        // The ingress, then the targets' health in a later write: the
        // leader steps aside only once both are in place, or the shadow
        // would rightly plan the write it left undone.
        eventually("an ingress and healthy targets", WAIT, || async {
            let service = services.get(name).await.ok()?;
            let healthy = service
                .status
                .as_ref()?
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "LoadBalancerTargetsHealthy" && c.status == "True");
            (!ingress_ips(&service).is_empty() && healthy).then_some(())
        })
        .await
        .expect("a bounded wait");
    }
    for name in ["shadow-node-0", "shadow-node-1"] {
        eventually("node initialized", WAIT, || async {
            let node = nodes.get(name).await.ok()?;
            let tainted = node
                .spec?
                .taints
                .into_iter()
                .flatten()
                .any(|t| t.key.contains("uninitialized"));
            (!tainted).then_some(())
        })
        .await
        .expect("a bounded wait");
    }
    leader.terminate().await.unwrap();
    let mut leader = leader;
    leader.wait(Duration::from_secs(30)).await.unwrap();
    let calls_before = calls(&cloud).await.len();

    let shadow = start_shadow(dir.path(), &server, &cloud).await;
    let settled = eventually("both Services planned in place", WAIT, || async {
        let plan = plan(&shadow).await;
        (entries_for(&plan, "already-in-place").len() >= 2).then_some(plan)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(settled["would_change"], 0, "{settled:#}");
    let in_place: Vec<&str> = entries_for(&settled, "already-in-place")
        .iter()
        .filter_map(|e| e["object"].as_str())
        .collect();
    assert!(
        in_place.contains(&"default/web") && in_place.contains(&"default/db"),
        "{settled:#}"
    );

    let patch = json!({"spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}});
    services
        .patch("web", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let changed = eventually("the port change planned", WAIT, || async {
        let plan = plan(&shadow).await;
        (!entries_for(&plan, "would-change").is_empty()).then_some(plan)
    })
    .await
    .expect("a bounded wait");
    let would_change = entries_for(&changed, "would-change");
    assert_eq!(would_change.len(), 1, "{changed:#}");
    assert_eq!(would_change[0]["object"], "default/web");
    assert_eq!(would_change[0]["operation"], "ensure_load_balancer");
    let difference = would_change[0]["difference"].to_string();
    assert!(
        difference.contains("8080"),
        "the difference names the new port: {difference}"
    );
    let log = shadow.log();
    assert_eq!(
        log.matches("dry run: would change").count(),
        1,
        "one line for one change:\n{log}"
    );
    let metrics = shadow.metrics().await.unwrap();
    assert!(
        metrics.contains("dry_run_planned_operations_total{controller=\"service\",operation=\"ensure_load_balancer\"} 3"),
        "two in place, one change:\n{metrics}"
    );

    let shadow_calls: Vec<Value> = calls(&cloud).await.into_iter().skip(calls_before).collect();
    assert!(!shadow_calls.is_empty(), "the shadow read the cloud");
    let mutations: Vec<&Value> = shadow_calls
        .iter()
        .filter(|c| c["mutation"] == true || c["applied"] == true)
        .collect();
    assert!(
        mutations.is_empty(),
        "the shadow changed the cloud: {mutations:#?}"
    );
    let writes = shadow_writes(&server);
    assert!(
        writes.is_empty(),
        "the shadow wrote to the API server: {writes:?}"
    );
    let service = services.get("web").await.unwrap();
    assert_eq!(
        ingress_ips(&service).len(),
        1,
        "the status the leader wrote stays"
    );
}

/// On a cluster nobody has set up, a shadow plans the node's initialization
/// and the Service's claim (Kubernetes writes it intercepts) and leaves both
/// as they were.
#[tokio::test]
async fn a_shadow_on_a_new_cluster_plans_its_writes_without_sending_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let cloud = fake_cloud().await;
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(&PostParams::default(), &uninitialized_node("fresh-node"))
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    services
        .create(&PostParams::default(), &load_balancer_service("web", &[]))
        .await
        .unwrap();
    let shadow = start_shadow(dir.path(), &server, &cloud).await;
    let planned = eventually("the node and the Service planned", WAIT, || async {
        let plan = plan(&shadow).await;
        let changes = entries_for(&plan, "would-change");
        let node = changes
            .iter()
            .any(|e| e["controller"] == "cloud-node" && e["object"] == "fresh-node");
        let service = changes
            .iter()
            .any(|e| e["controller"] == "service" && e["object"] == "default/web");
        (node && service).then_some(plan)
    })
    .await
    .expect("a bounded wait");
    let operations: Vec<&str> = entries_for(&planned, "would-change")
        .iter()
        .filter_map(|e| e["operation"].as_str())
        .collect();
    assert!(
        operations.iter().any(|o| o.starts_with("patch nodes")),
        "the node's initialization (its addresses first): {planned:#}"
    );
    let writes = shadow_writes(&server);
    assert!(
        writes.is_empty(),
        "the shadow wrote to the API server: {writes:?}"
    );
    let node = nodes.get("fresh-node").await.unwrap();
    let tainted = node
        .spec
        .unwrap()
        .taints
        .into_iter()
        .flatten()
        .any(|t| t.key.contains("uninitialized"));
    assert!(tainted, "the node is left for the CCM that leads");
    let service = services.get("web").await.unwrap();
    assert!(
        service.metadata.finalizers.is_none(),
        "no finalizer was added"
    );
    assert!(ingress_ips(&service).is_empty());
    assert!(
        calls(&cloud)
            .await
            .iter()
            .all(|c| c["mutation"] == false && c["applied"] == false),
        "no load balancer was made"
    );
}

/// The chart's shadow RBAC (`dryRun.enabled`) is enough: the shadow runs
/// under it without a single refusal (any `forbidden` in its log fails the
/// test), plans a new cluster's node initialization and Service claim, and
/// the API server's objects stay as they were.
#[tokio::test]
async fn the_charts_read_only_rbac_is_all_a_shadow_needs() {
    let dir = tempfile::tempdir().unwrap();
    let api = ApiServer::start().await.unwrap();
    let credentials = api.dry_run_credentials().await.unwrap();
    let cloud = fake_cloud().await;
    let client = api.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node_name = unique("shadow-rbac-node");
    nodes
        .create(&PostParams::default(), &uninitialized_node(&node_name))
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client, "default");
    let service_name = unique("shadow-rbac");
    services
        .create(
            &PostParams::default(),
            &load_balancer_service(&service_name, &[]),
        )
        .await
        .unwrap();
    let cloud_config = dir.path().join("shadow.toml");
    std::fs::write(&cloud_config, format!("[server]\nurl = \"{cloud}\"\n")).unwrap();
    let shadow = Launch::new(BINARY, dir.path().join("shadow.log"))
        .metrics_behind_authorization()
        .credentials(&credentials)
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            "--configure-cloud-routes=false".to_owned(),
            "--dry-run".to_owned(),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/plan"
                .to_owned(),
        ])
        .start()
        .await
        .unwrap();
    let service_key = format!("default/{service_name}");
    eventually("the node and the Service planned", WAIT, || async {
        let plan = plan(&shadow).await;
        let changes = entries_for(&plan, "would-change");
        let node = changes.iter().any(|e| e["object"] == node_name.as_str());
        let service = changes.iter().any(|e| e["object"] == service_key.as_str());
        (node && service).then_some(())
    })
    .await
    .expect("a bounded wait");
    let node = nodes.get(&node_name).await.unwrap();
    assert!(
        node.spec.unwrap().provider_id.is_none(),
        "the node is left as it was"
    );
    let service = services.get(&service_name).await.unwrap();
    assert!(
        service.metadata.finalizers.is_none(),
        "no finalizer was added"
    );
    assert!(calls(&cloud).await.iter().all(|c| c["mutation"] == false));
}
