//! End to end: the real binary and `kubectl`, against an API server started
//! for the test (the in-memory one, or a real kube-apiserver with the CCM
//! under the chart's RBAC when `CCM_TEST_APISERVER=real`), or, unchanged,
//! against a real cluster when `KUBECONFIG` is set (that variant is ignored
//! by default).
//!
//! The fake cloud answers for any node name, so on a real cluster the suite
//! registers its own Node objects (with unique names) and cleans them up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ccm_test_support::{
    ApiServer, Ccm, Credentials, Launch, eventually, kubectl, uninitialized_node, unique,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
/// The label on the suite's own nodes, so `kubectl get -l` lists only them.
const SUITE_LABEL: &str = "e2e.ccm.example/suite";

/// Where the suite runs: a kubeconfig and a client for it.
struct Target {
    kubeconfig: PathBuf,
    client: kube::Client,
    /// What the CCM runs with: the chart's ServiceAccount on a real
    /// kube-apiserver started for the test, else the administrator.
    credentials: Credentials,
    /// Keeps the API server alive when the test started it.
    _server: Option<ApiServer>,
}

impl Target {
    /// The API server the environment asks for, started for this test.
    async fn local() -> Self {
        let server = ApiServer::start().await.unwrap();
        Self {
            kubeconfig: server.kubeconfig_path().to_owned(),
            client: server.client(),
            credentials: server.ccm_credentials("fake").await.unwrap(),
            _server: Some(server),
        }
    }

    /// The cluster `KUBECONFIG` points at.
    async fn real_cluster() -> Self {
        let kubeconfig = PathBuf::from(
            std::env::var_os("KUBECONFIG").expect("set KUBECONFIG to a real cluster"),
        );
        let client = kube::Client::try_default()
            .await
            .expect("a client for KUBECONFIG");
        Self {
            credentials: Credentials {
                kubeconfig: kubeconfig.clone(),
                rbac_limited: false,
            },
            kubeconfig,
            client,
            _server: None,
        }
    }
}

/// Starts the CCM for `cluster_name` with `credentials`. With the
/// administrator's, it takes a Lease of its own so a real cluster's CCM is
/// not disturbed; with the chart's, the chart's Lease (the only one its
/// Role may update).
async fn start_ccm(credentials: &Credentials, cluster_name: &str, dir: &Path) -> Ccm {
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
    let mut launch = Launch::new(BINARY, dir.join("ccm.log"))
        .credentials(credentials)
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            format!("--cluster-name={cluster_name}"),
            "--configure-cloud-routes=false".to_owned(),
            "--node-monitor-period=1s".to_owned(),
        ]);
    if !credentials.rbac_limited {
        launch = launch.args([format!("--leader-elect-resource-name={cluster_name}")]);
    }
    launch.start().await.expect("the CCM starts and is ready")
}

/// Nodes are initialized, a LoadBalancer Service created with kubectl gets an
/// ingress, and deleting it releases the load balancer and the finalizer.
async fn nodes_and_load_balancers(target: Target) {
    let cluster = unique("e2e");
    let nodes: Api<Node> = Api::all(target.client.clone());
    let names: Vec<String> = (0..3).map(|i| format!("{cluster}-node-{i}")).collect();
    for name in &names {
        let mut node = uninitialized_node(name);
        node.metadata
            .labels
            .get_or_insert_default()
            .insert(SUITE_LABEL.to_owned(), "fake".to_owned());
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let ccm = start_ccm(&target.credentials, &cluster, dir.path()).await;

    for name in &names {
        let node = eventually("node initialized", WAIT, || async {
            let node = nodes.get(name).await.ok()?;
            let tainted = node
                .spec
                .as_ref()?
                .taints
                .iter()
                .flatten()
                .any(|t| t.key.contains("uninitialized"));
            (!tainted).then_some(node)
        })
        .await
        .expect("a bounded wait");
        assert_eq!(
            node.spec.unwrap().provider_id,
            Some(format!("fake://{name}"))
        );
        let labels = node.metadata.labels.unwrap();
        assert_eq!(
            labels
                .get("node.kubernetes.io/instance-type")
                .map(String::as_str),
            Some("fake.standard")
        );
    }
    let wide = kubectl(
        &target.kubeconfig,
        &[
            "get",
            "nodes",
            "-o",
            "wide",
            "-l",
            &format!("{SUITE_LABEL}=fake"),
        ],
    )
    .await
    .expect("kubectl");
    assert!(names.iter().all(|n| wide.contains(n.as_str())), "{wide}");

    let service = format!("{cluster}-web");
    let manifest = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        manifest.path(),
        format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: {service}\n  namespace: default\nspec:\n  type: LoadBalancer\n  ports:\n  - port: 80\n    targetPort: 8080\n"),
    )
    .unwrap();
    // kubectl's own validation: server-side, found through OpenAPI v3 on
    // both API servers.
    kubectl(
        &target.kubeconfig,
        &["apply", "-f", manifest.path().to_str().unwrap()],
    )
    .await
    .expect("kubectl");
    let services: Api<Service> = Api::namespaced(target.client.clone(), "default");
    let ingress = eventually("an ingress", WAIT, || async {
        let svc = services.get(&service).await.ok()?;
        svc.status?.load_balancer?.ingress?.into_iter().next()?.ip
    })
    .await
    .expect("a bounded wait");
    assert!(ingress.starts_with("100."), "{ingress}");
    let svc = services.get(&service).await.unwrap();
    assert!(
        svc.metadata
            .finalizers
            .unwrap()
            .contains(&"service.kubernetes.io/load-balancer-cleanup".to_owned())
    );

    // The conditions, as an operator reads them: True once the load
    // balancer exists and its targets pass the fake cloud's checks.
    let conditions = eventually("both conditions True", WAIT, || async {
        let printed = kubectl(
            &target.kubeconfig,
            &[
                "get",
                "svc",
                &service,
                "-n",
                "default",
                "-o",
                "jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}: {.message}{\"\\n\"}{end}",
            ],
        )
        .await
        .ok()?;
        (printed.contains("LoadBalancerProvisioned=True/Provisioned")
            && printed.contains("LoadBalancerTargetsHealthy=True/AllTargetsHealthy"))
        .then_some(printed)
    })
    .await
    .expect("a bounded wait");
    assert!(
        conditions.contains(&format!(
            "LoadBalancerProvisioned=True/Provisioned: load balancer ready at {ingress}"
        )),
        "{conditions}"
    );
    // Every node of the cluster backs it: ours, and on a shared real
    // cluster others too.
    let healthy = conditions
        .lines()
        .find_map(|l| l.strip_prefix("LoadBalancerTargetsHealthy=True/AllTargetsHealthy: "))
        .and_then(|m| m.strip_suffix(" targets healthy"))
        .and_then(|m| m.split_once(" of "))
        .and_then(|(k, n)| Some((k.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
    assert!(
        healthy.is_some_and(|(k, n)| k == n && n >= names.len()),
        "{conditions}"
    );

    // What the chart's alert rules and dashboard query is exported, while
    // the Service (and so its per-Service gauge) exists.
    let metrics = ccm.metrics().await.expect("/metrics");
    ccm_test_support::monitoring::check_chart_metrics_exported(
        &metrics,
        &[(
            "ccm_route_nodes_missing_routes",
            "this run passes --configure-cloud-routes=false",
        )],
    )
    .unwrap();

    kubectl(
        &target.kubeconfig,
        &[
            "delete",
            "service",
            &service,
            "-n",
            "default",
            "--wait=false",
        ],
    )
    .await
    .expect("kubectl");
    eventually("the Service gone (finalizer removed)", WAIT, || async {
        services
            .get_opt(&service)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await
    .expect("a bounded wait");

    for name in &names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}

/// On the API server the environment asks for ([`ApiServer::start`]).
#[tokio::test]
async fn nodes_and_load_balancers_on_a_fresh_apiserver() {
    nodes_and_load_balancers(Target::local().await).await;
}

#[tokio::test]
#[ignore = "needs a real cluster: set KUBECONFIG"]
async fn nodes_and_load_balancers_on_a_real_cluster() {
    nodes_and_load_balancers(Target::real_cluster().await).await;
}
