//! `--use-service-account-credentials`: each controller writes as its own
//! ServiceAccount in kube-system, with tokens from the TokenRequest API; the
//! Lease and the informers keep the main credentials; an expired token is
//! renewed without the controller's write failing.

use std::path::Path;
use std::time::Duration;

use ccm_test_apiserver::{RequestRecord, TestApiServer};
use ccm_test_support::{
    Ccm, Launch, eventually, ingress_ips, load_balancer_service, uninitialized_node, unique,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(30);
const ADMIN_TOKEN: &str = "sa-test-admin-token";
const NODE_CONTROLLER: &str = "system:serviceaccount:kube-system:node-controller";
const SERVICE_CONTROLLER: &str = "system:serviceaccount:kube-system:service-controller";
const ROUTE_CONTROLLER: &str = "system:serviceaccount:kube-system:route-controller";

/// A test API server that authenticates: the CCM's main identity is `admin`.
async fn server(dir: &Path) -> TestApiServer {
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        format!("{ADMIN_TOKEN},admin,admin-uid,\"system:masters\"\n"),
    )
    .unwrap();
    TestApiServer::builder()
        .token_auth_file(&tokens)
        .kubeconfig_path(dir.join("kubeconfig"))
        .start()
        .await
        .unwrap()
}

async fn start(server: &TestApiServer, dir: &Path) -> Ccm {
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
    Launch::new(BINARY, dir.join("ccm.log"))
        .args([
            format!("--kubeconfig={}", server.kubeconfig_path().display()),
            format!("--cloud-config={}", cloud_config.display()),
            "--use-service-account-credentials=true".to_owned(),
            "--cluster-cidr=10.244.0.0/16".to_owned(),
            "--allocate-node-cidrs=true".to_owned(),
            "--route-reconciliation-period=1s".to_owned(),
            "--leader-elect-lease-duration=3s".to_owned(),
            "--leader-elect-renew-deadline=2s".to_owned(),
            "--leader-elect-retry-period=500ms".to_owned(),
        ])
        .start()
        .await
        .expect("the CCM starts and leads")
}

fn writes_by<'a>(requests: &'a [RequestRecord], user: &str) -> Vec<&'a RequestRecord> {
    requests
        .iter()
        .filter(|r| r.user.as_deref() == Some(user) && r.method != "GET")
        .collect()
}

fn node_with_cidr(name: &str, cidr: &str) -> Node {
    let mut node = uninitialized_node(name);
    node.spec.get_or_insert_default().pod_cidr = Some(cidr.to_owned());
    node.spec.get_or_insert_default().pod_cidrs = Some(vec![cidr.to_owned()]);
    node
}

async fn ingress_of(services: &Api<Service>, name: &str) -> Vec<String> {
    eventually("an ingress", WAIT, || async {
        let service = services.get(name).await.ok()?;
        let ips = ingress_ips(&service);
        (!ips.is_empty()).then_some(ips)
    })
    .await
    .expect("a bounded wait")
}

#[tokio::test]
async fn each_controller_writes_as_its_own_service_account_and_the_lease_as_the_main_identity() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let _ccm = start(&server, dir.path()).await;
    let name = unique("sa-node");
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(
            &PostParams::default(),
            &node_with_cidr(&name, "10.244.7.0/24"),
        )
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    services
        .create(&PostParams::default(), &load_balancer_service("web", &[]))
        .await
        .unwrap();
    ingress_of(&services, "web").await;
    eventually("node initialized and routed", WAIT, || async {
        let node = nodes.get(&name).await.ok()?;
        let status = node.status?;
        let routed = status
            .conditions?
            .iter()
            .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False");
        let initialized = node.spec?.provider_id.is_some();
        (routed && initialized).then_some(())
    })
    .await
    .expect("a bounded wait");

    let requests = server.requests();
    let node_writes = writes_by(&requests, NODE_CONTROLLER);
    assert!(
        node_writes
            .iter()
            .any(|r| r.resource == "nodes" && r.name == name),
        "node initialization as node-controller: {node_writes:#?}"
    );
    let service_writes = writes_by(&requests, SERVICE_CONTROLLER);
    assert!(
        service_writes
            .iter()
            .any(|r| r.resource == "services" && r.subresource == "status"),
        "the ingress written as service-controller: {service_writes:#?}"
    );
    let route_writes = writes_by(&requests, ROUTE_CONTROLLER);
    assert!(
        route_writes
            .iter()
            .any(|r| r.resource == "nodes" && r.subresource == "status" && r.name == name),
        "NetworkUnavailable written as route-controller: {route_writes:#?}"
    );
    for controller in [NODE_CONTROLLER, SERVICE_CONTROLLER, ROUTE_CONTROLLER] {
        assert!(
            writes_by(&requests, controller)
                .iter()
                .all(|r| r.resource != "leases"),
            "{controller} never touches the Lease"
        );
    }
    let lease_writes: Vec<_> = requests
        .iter()
        .filter(|r| r.resource == "leases" && r.method != "GET")
        .collect();
    assert!(!lease_writes.is_empty());
    assert!(
        lease_writes
            .iter()
            .all(|r| r.user.as_deref() == Some("admin")),
        "the Lease is renewed by the main identity: {lease_writes:#?}"
    );
    let watches: Vec<_> = requests
        .iter()
        .filter(|r| r.verb == "watch" && (r.resource == "nodes" || r.resource == "services"))
        .collect();
    assert!(
        !watches.is_empty() && watches.iter().all(|r| r.user.as_deref() == Some("admin")),
        "the informers keep the main credentials: {watches:#?}"
    );
    let token_requests: Vec<_> = requests
        .iter()
        .filter(|r| r.resource == "serviceaccounts" && r.subresource == "token")
        .map(|r| r.name.as_str())
        .collect();
    for account in ["node-controller", "service-controller", "route-controller"] {
        assert!(token_requests.contains(&account), "{token_requests:?}");
    }
}

#[tokio::test]
async fn an_expired_token_is_renewed_and_the_write_goes_through() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let ccm = start(&server, dir.path()).await;
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    services
        .create(&PostParams::default(), &load_balancer_service("first", &[]))
        .await
        .unwrap();
    ingress_of(&services, "first").await;
    let tokens_before = server
        .requests()
        .iter()
        .filter(|r| r.subresource == "token" && r.name == "service-controller")
        .count();

    let expired = server.expire_service_account_tokens("kube-system", "service-controller");
    assert!(expired >= 1, "the service controller held a token");
    services
        .create(
            &PostParams::default(),
            &load_balancer_service("second", &[]),
        )
        .await
        .unwrap();
    let ips = ingress_of(&services, "second").await;
    assert!(!ips.is_empty());

    let requests = server.requests();
    let refused: Vec<_> = requests
        .iter()
        .filter(|r| r.status == 401 && r.user_agent.ends_with("/service-controller"))
        .collect();
    assert!(
        !refused.is_empty(),
        "the API server refused the expired token"
    );
    let tokens_after = requests
        .iter()
        .filter(|r| r.subresource == "token" && r.name == "service-controller")
        .count();
    assert_eq!(tokens_after, tokens_before + 1, "one renewal");
    let second_writes: Vec<_> = writes_by(&requests, SERVICE_CONTROLLER)
        .into_iter()
        .filter(|r| r.name == "second")
        .collect();
    assert!(
        second_writes.iter().all(|r| r.status < 300),
        "every accepted write succeeded: {second_writes:#?}"
    );
    let log = ccm.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("second") && (l.contains("ERROR") || l.contains("WARN"))),
        "the controller saw no failure:\n{log}"
    );
    assert!(!log.contains(ADMIN_TOKEN), "no token in the log");
}
