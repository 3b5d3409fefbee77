//! Rancher end to end: the real `rancher-cloud-controller-manager` binary
//! against the API server the environment asks for (in memory, or a real
//! kube-apiserver under the chart's RBAC) and the Cattle API emulator over
//! HTTP. Nodes are initialized from their hosts; a Service gets a load
//! balancer with an ingress IP that follows the nodes and is deleted with
//! nothing left behind; what upstream's CCM made is adopted with no create;
//! wrong credentials and a storm of server errors are survived.
//!
//! Every wait is bounded; a failing test prints the CCM's log.

use std::time::Duration;

use ccm_provider_rancher::emulator::{ACCESS_KEY, CattleEmulator, Faults, SECRET_KEY, Snapshot};
use ccm_provider_rancher::{CLUSTER_KEY, load_balancer_name};
use ccm_test_support::{
    ApiServer, Ccm, Launch, UNINITIALIZED, eventually, has_taint, ingress_ips,
    load_balancer_service, uninitialized_node, unique,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{DeleteParams, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_rancher-cloud-controller-manager");
/// How long any one outcome may take.
const WAIT: Duration = Duration::from_secs(60);
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

fn env(cattle: &CattleEmulator, secret: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CATTLE_URL", cattle.url()),
        ("CATTLE_ACCESS_KEY", ACCESS_KEY.to_owned()),
        ("CATTLE_SECRET_KEY", secret.to_owned()),
    ]
}

fn launch(env: &[(&str, String)]) -> Launch {
    let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{}.log", unique("rancher-ccm")));
    let mut launch = Launch::new(BINARY, log).args([
        "--v=2".to_owned(),
        "--cluster-name=e2e".to_owned(),
        "--node-monitor-period=1s".to_owned(),
        "--leader-elect-lease-duration=4s".to_owned(),
        "--leader-elect-renew-deadline=3s".to_owned(),
        "--leader-elect-retry-period=1s".to_owned(),
    ]);
    for (key, value) in env {
        launch = launch.env(key, value.clone());
    }
    launch
}

/// The CCM against an API server and the emulator. Fields drop in order:
/// the CCM is killed before the API server stops.
struct Cluster {
    ccm: Ccm,
    server: ApiServer,
    cattle: CattleEmulator,
    /// The host UUID of each node [`Cluster::start`] made, by name.
    uuids: std::collections::BTreeMap<String, String>,
}

impl Cluster {
    /// An API server with `node-1`..`node-<n>` as kubelets register them,
    /// hosts of the same names at `10.42.0.<i>`, and a ready CCM.
    async fn start(cattle: CattleEmulator, nodes: usize) -> Self {
        let mut uuids = std::collections::BTreeMap::new();
        for i in 1..=nodes {
            let name = format!("node-{i}");
            let host = cattle.add_host(&name, &format!("10.42.0.{i}"));
            uuids.insert(name, host.uuid);
        }
        let server = ApiServer::with_nodes(nodes)
            .await
            .expect("the API server starts");
        let mut cluster = Self::with_server(cattle, server, SECRET_KEY).await;
        cluster.uuids = uuids;
        cluster
    }

    async fn with_server(cattle: CattleEmulator, server: ApiServer, secret: &str) -> Self {
        let credentials = server
            .ccm_credentials("rancher")
            .await
            .expect("the chart's RBAC for rancher");
        let ccm = launch(&env(&cattle, secret))
            .credentials(&credentials)
            .start()
            .await
            .expect("the CCM starts");
        Self {
            ccm,
            server,
            cattle,
            uuids: std::collections::BTreeMap::new(),
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.server.client())
    }

    fn services(&self) -> Api<Service> {
        Api::namespaced(self.server.client(), "default")
    }

    async fn wait<T, F, Fut>(&self, what: &str, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        eventually(what, WAIT, check)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.ccm.log_tail()))
    }

    async fn initialized(&self, name: &str) -> Node {
        self.wait(&format!("{name} is initialized"), || async {
            self.nodes()
                .get(name)
                .await
                .ok()
                .filter(|n| !has_taint(n, UNINITIALIZED))
        })
        .await
    }

    async fn provisioned(&self, name: &str) -> Service {
        self.wait(&format!("{name} has an ingress IP"), || async {
            self.services()
                .get(name)
                .await
                .ok()
                .filter(|s| !ingress_ips(s).is_empty())
        })
        .await
    }

    /// The emulator's state once `check` holds.
    async fn cattle_until(&self, what: &str, check: impl Fn(&Snapshot) -> bool) -> Snapshot {
        self.wait(what, || async {
            let snapshot = self.cattle.snapshot();
            check(&snapshot).then_some(snapshot)
        })
        .await
    }
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn addresses(node: &Node) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    found.sort();
    found
}

/// The external-service names the load balancer `name` sends to.
fn targets(snapshot: &Snapshot, name: &str) -> Vec<String> {
    let Some(lb) = snapshot.load_balancers.iter().find(|lb| lb.name == name) else {
        return Vec::new();
    };
    let mut names: Vec<String> = lb
        .port_rules
        .iter()
        .filter_map(|r| {
            snapshot
                .external_services
                .iter()
                .find(|s| s.id == r.service_id)
                .map(|s| s.name.clone())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_a_load_balancer_from_creation_to_deletion() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    let cluster = Cluster::start(cattle, 2).await;

    for i in 1..=2 {
        let name = format!("node-{i}");
        let node = cluster.initialized(&name).await;
        let host = &cluster.uuids[&name];
        let spec = node.spec.as_ref().expect("spec");
        assert_eq!(
            spec.provider_id.as_deref(),
            Some(format!("rancher://{host}").as_str())
        );
        assert_eq!(
            label(&node, "node.kubernetes.io/instance-type"),
            Some("rancher")
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/zone"),
            Some("FailureDomain1")
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/region"),
            Some("Region1")
        );
        let ip = format!("10.42.0.{i}");
        let mut expected = vec![
            ("ExternalIP".to_owned(), ip.clone()),
            ("Hostname".to_owned(), name.clone()),
            ("InternalIP".to_owned(), ip),
        ];
        expected.sort();
        assert_eq!(addresses(&node), expected, "{name}");
    }

    let created = cluster
        .services()
        .create(&PostParams::default(), &load_balancer_service("web", &[]))
        .await
        .expect("service created");
    let lb_name = load_balancer_name(&created);
    let service = cluster.provisioned("web").await;
    // The load balancer's container runs on the first host.
    assert_eq!(ingress_ips(&service), ["10.42.0.1"]);
    let node_port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p[0].node_port);
    let snapshot = cluster.cattle.snapshot();
    assert_eq!(snapshot.load_balancers.len(), 1, "{snapshot:?}");
    let lb = &snapshot.load_balancers[0];
    assert_eq!(lb.name, lb_name);
    assert_eq!(lb.ports, ["80:80/tcp"]);
    assert_eq!(lb.state, "active");
    assert_eq!(
        lb.metadata.get(CLUSTER_KEY).and_then(|v| v.as_str()),
        Some("e2e")
    );
    assert!(
        lb.port_rules
            .iter()
            .all(|r| Some(r.target_port) == node_port.map(i64::from))
    );
    assert_eq!(targets(&snapshot, &lb_name), ["node-1", "node-2"]);
    assert_eq!(snapshot.stacks.len(), 1, "{snapshot:?}");

    // A node joins: the load balancer sends to it too.
    cluster.cattle.add_host("node-3", "10.42.0.3");
    cluster
        .nodes()
        .create(&PostParams::default(), &uninitialized_node("node-3"))
        .await
        .expect("node-3 registered");
    cluster.initialized("node-3").await;
    cluster
        .cattle_until("the load balancer sends to node-3", |s| {
            targets(s, &lb_name) == ["node-1", "node-2", "node-3"]
        })
        .await;

    // Deleted: the load balancer and every external service go, then the
    // finalizer.
    cluster
        .services()
        .delete("web", &DeleteParams::default())
        .await
        .expect("service deleted");
    cluster
        .wait("web is gone", || async {
            cluster
                .services()
                .get_opt("web")
                .await
                .ok()
                .and_then(|s| s.is_none().then_some(()))
        })
        .await;
    let left = cluster.cattle.snapshot();
    assert!(left.load_balancers.is_empty(), "{left:?}");
    assert!(left.external_services.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_upstream_made_is_adopted_with_zero_creates() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    for i in 1..=2 {
        cattle.add_host(&format!("node-{i}"), &format!("10.42.0.{i}"));
    }
    let server = ApiServer::with_nodes(2)
        .await
        .expect("the API server starts");
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    let created = services
        .create(
            &PostParams::default(),
            &load_balancer_service("legacy", &[]),
        )
        .await
        .expect("service created");
    let node_port = created
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p[0].node_port)
        .expect("a node port");
    let lb_name = load_balancer_name(&created);
    cattle.seed_upstream(
        &lb_name,
        &[(80, i64::from(node_port))],
        &["node-1", "node-2"],
    );
    let before = cattle.snapshot();

    let cluster = Cluster::with_server(cattle, server, SECRET_KEY).await;
    let service = cluster.provisioned("legacy").await;
    assert_eq!(ingress_ips(&service), ["10.42.0.1"]);
    assert!(
        service
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER),
        "the Service is claimed"
    );
    let after = cluster
        .cattle_until("the adopted load balancer records its cluster", |s| {
            s.load_balancers
                .iter()
                .any(|lb| lb.metadata.contains_key(CLUSTER_KEY))
        })
        .await;
    let creates: Vec<_> = cluster
        .cattle
        .calls()
        .into_iter()
        .filter(|c| c.method == "POST" && c.action.is_none())
        .collect();
    assert!(creates.is_empty(), "adoption created {creates:?}");
    assert_eq!(after.load_balancers.len(), 1);
    assert_eq!(after.load_balancers[0].id, before.load_balancers[0].id);
    assert_eq!(after.external_services, before.external_services);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_one_clear_line_without_the_secret() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    cattle.add_host("node-1", "10.42.0.1");
    let server = ApiServer::with_nodes(1)
        .await
        .expect("the API server starts");
    let wrong = "not-the-secret-7f3a";
    let cluster = Cluster::with_server(cattle, server, wrong).await;
    cluster
        .wait("the CCM says the key was refused", || async {
            cluster
                .ccm
                .log()
                .contains("Rancher refused the API key (401)")
                .then_some(())
        })
        .await;
    let log = cluster.ccm.log();
    assert!(!log.contains(wrong), "the secret is never logged:\n{log}");
    let node = cluster.nodes().get("node-1").await.expect("node-1");
    assert!(
        has_taint(&node, UNINITIALIZED),
        "nothing is initialized without a valid key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_server_errors_converges_with_nothing_duplicated() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    let cluster = Cluster::start(cattle, 3).await;
    for i in 1..=3 {
        cluster.initialized(&format!("node-{i}")).await;
    }
    cluster.cattle.set_faults(Faults {
        server_error_rate: 0.4,
        conflict_rate: 0.2,
        ..Faults::default()
    });
    for name in ["storm-a", "storm-b"] {
        cluster
            .services()
            .create(&PostParams::default(), &load_balancer_service(name, &[]))
            .await
            .expect("service created");
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    cluster.cattle.set_faults(Faults::default());
    for name in ["storm-a", "storm-b"] {
        cluster.provisioned(name).await;
    }
    let snapshot = cluster
        .cattle_until("both load balancers send to all three nodes", |s| {
            s.load_balancers.len() == 2
                && s.load_balancers
                    .iter()
                    .all(|lb| targets(s, &lb.name).len() == 3)
        })
        .await;
    assert_eq!(
        snapshot.external_services.len(),
        3,
        "one per node, shared: {snapshot:?}"
    );
    assert_eq!(snapshot.stacks.len(), 1, "{snapshot:?}");
}

#[tokio::test]
async fn missing_credentials_exit_64_with_one_line() {
    let output = Launch::new(BINARY, std::env::temp_dir().join(unique("rancher-exit")))
        .env("CATTLE_ACCESS_KEY", "AK")
        .env("CATTLE_SECRET_KEY", "hidden-secret-9")
        .output()
        .await
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("CATTLE_URL"), "{stderr}");
    assert!(!stderr.contains("hidden-secret-9"), "{stderr}");
}
