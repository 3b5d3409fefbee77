//! End to end: the real binary with `kubelet-serving-csr-approver` on,
//! under the chart's RBAC for it (`ci/fake-csr-approver-values.yaml`),
//! decides kubelet serving certificate requests made from fresh keys and
//! submitted as the nodes themselves (impersonation), on the API server
//! the environment asks for (in-memory, or kube-apiserver with
//! `CCM_TEST_APISERVER=real`).

use std::time::{Duration, Instant};

use ccm_test_support::{
    ApiServer, Launch, SERVING_USAGES, csr_craft, eventually, kubelet_serving_csr,
    kubelet_serving_request, uninitialized_node, unique,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
const SERVING: &[&str] = SERVING_USAGES;

/// A fresh key's request for `node` with these names.
fn request_pem(node: &str, dns: &[&str], ips: &[&str]) -> String {
    let names: Vec<&str> = dns.iter().chain(ips).copied().collect();
    kubelet_serving_request(&format!("system:node:{node}"), &names)
}

fn csr(name: &str, pem: &str, usages: &[&str]) -> CertificateSigningRequest {
    kubelet_serving_csr(name, pem, usages)
}

/// Lets `system:nodes` create certificate requests, as a cluster whose
/// kubelets rotate their certificates does.
async fn nodes_may_request(server: &ApiServer) {
    let admin = server.client();
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "e2e-node-csr"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["create", "get"]}]
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "e2e-node-csr"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-node-csr"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// Submits `csr` as node `node` (retried while RBAC reaches the
/// authorizer's cache).
async fn submit_as(server: &ApiServer, node: &str, csr: &CertificateSigningRequest) {
    let client = server
        .client_impersonating(&format!("system:node:{node}"), &["system:nodes"])
        .await
        .unwrap();
    let api: Api<CertificateSigningRequest> = Api::all(client);
    eventually("the request submitted", WAIT, || async {
        api.create(&PostParams::default(), csr).await.ok()
    })
    .await
    .unwrap();
}

/// The request's decision: condition type and message.
async fn decision(csrs: &Api<CertificateSigningRequest>, name: &str) -> (String, String) {
    eventually(&format!("a decision on {name}"), WAIT, || async {
        let condition = csrs
            .get(name)
            .await
            .ok()?
            .status?
            .conditions?
            .into_iter()
            .next()?;
        Some((condition.type_, condition.message.unwrap_or_default()))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn kubelet_serving_certificates_are_approved_only_for_the_nodes_cloud_addresses() {
    let server = ApiServer::start().await.unwrap();
    nodes_may_request(&server).await;
    let credentials = server.ccm_credentials("fake-csr-approver").await.unwrap();
    let admin = server.client();
    let nodes: Api<Node> = Api::all(admin.clone());
    let csrs: Api<CertificateSigningRequest> = Api::all(admin);
    let (n, early, m) = (unique("csr-n"), unique("csr-early"), unique("csr-m"));
    for name in [&n, &early, &m] {
        nodes
            .create(&PostParams::default(), &uninitialized_node(name))
            .await
            .unwrap();
    }
    // Made before the CCM initializes its node: decided once it has.
    let early_pem = request_pem(&early, &[], &["10.0.0.2"]);
    submit_as(&server, &early, &csr("early", &early_pem, SERVING)).await;

    let dir = tempfile::tempdir().unwrap();
    let cloud_config = dir.path().join("cloud.toml");
    let instance = |name: &str, ip: &str| {
        format!(
            "[[instances]]\nname = \"{name}\"\naddresses = [{{ type = \"InternalIP\", address = \"{ip}\" }}, {{ type = \"Hostname\", address = \"{name}.fake.internal\" }}]\n"
        )
    };
    std::fs::write(
        &cloud_config,
        [
            instance(&n, "10.0.0.1"),
            instance(&early, "10.0.0.2"),
            instance(&m, "10.0.0.3"),
        ]
        .concat(),
    )
    .unwrap();
    let _ccm = Launch::new(BINARY, dir.path().join("ccm.log"))
        .credentials(&credentials)
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            format!("--cluster-name={}", unique("csr")),
            "--configure-cloud-routes=false".to_owned(),
            "--controllers=cloud-node,kubelet-serving-csr-approver".to_owned(),
        ])
        .start()
        .await
        .expect("the CCM starts and is ready");

    let (kind, _) = decision(&csrs, "early").await;
    assert_eq!(
        kind, "Approved",
        "the early request, once its node was initialized"
    );
    eventually("node n initialized", WAIT, || async {
        let node = nodes.get(&n).await.ok()?;
        node.spec?.provider_id.map(|_| ())
    })
    .await
    .unwrap();

    let good = request_pem(&n, &[&format!("{n}.fake.internal")], &["10.0.0.1"]);
    let asked = Instant::now();
    submit_as(&server, &n, &csr("good", &good, SERVING)).await;
    let (kind, _) = decision(&csrs, "good").await;
    let took = asked.elapsed();
    assert_eq!(kind, "Approved");
    println!("a node's serving certificate request approved in {took:.2?}");
    assert!(took < Duration::from_secs(5), "approved in {took:?}");

    let extra_ip = request_pem(&n, &[], &["10.0.0.1", "10.0.0.99"]);
    submit_as(&server, &n, &csr("extra-ip", &extra_ip, SERVING)).await;
    let (kind, message) = decision(&csrs, "extra-ip").await;
    assert_eq!(kind, "Denied");
    assert!(message.contains("10.0.0.99"), "{message}");

    let for_n = request_pem(&n, &[], &["10.0.0.1"]);
    submit_as(&server, &m, &csr("m-for-n", &for_n, SERVING)).await;
    let (kind, message) = decision(&csrs, "m-for-n").await;
    assert_eq!(kind, "Denied");
    assert!(message.contains(&format!("system:node:{n}")), "{message}");

    // Two PEM blocks: the first for n's own address, closed by an END line
    // of another type, so Go (kube-apiserver, the signer) skips it and
    // reads the second, for the API server's names.
    let own = csr_craft::Info::kubelet(&n, &[csr_craft::ip(&[10, 0, 0, 1])]);
    let theirs = csr_craft::Info::kubelet(
        &n,
        &[
            csr_craft::dns("kubernetes.default.svc"),
            csr_craft::ip(&[10, 0, 0, 1]),
        ],
    );
    let smuggled = format!(
        "{}{}",
        csr_craft::pem(&own.signed())
            .replace("-----END CERTIFICATE REQUEST-----", "-----END X-----"),
        csr_craft::pem(&theirs.signed())
    );
    submit_as(&server, &n, &csr("smuggled", &smuggled, SERVING)).await;
    let (kind, message) = decision(&csrs, "smuggled").await;
    assert_eq!(kind, "Denied", "{message}");
    assert!(message.contains("-----END X-----"), "{message}");

    let client_auth = ["digital signature", "server auth", "client auth"];
    submit_as(&server, &n, &csr("client-auth", &good, &client_auth)).await;
    let (kind, message) = decision(&csrs, "client-auth").await;
    assert_eq!(kind, "Denied");
    assert!(message.contains("client auth"), "{message}");
}
