//! Started as a kubeadm-style static pod starts a cloud-controller-manager:
//! the control plane's kubeconfig for the client and for delegated
//! authentication and authorization, profiling off, feature gates, `--v=2`,
//! per-controller credentials, routes for the pod network.

use std::time::Duration;

use ccm_test_apiserver::TestApiServer;
use ccm_test_support::{Launch, eventually, uninitialized_node, unique};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_kubeadm_style_static_pod_starts_leads_and_initializes_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestApiServer::builder()
        .kubeconfig_path(dir.path().join("controller-manager.conf"))
        .start()
        .await
        .unwrap();
    let conf = server.kubeconfig_path().display().to_string();
    let cloud_config = dir.path().join("cloud.toml");
    std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
    let args = [
        format!("--authentication-kubeconfig={conf}"),
        format!("--authorization-kubeconfig={conf}"),
        format!("--kubeconfig={conf}"),
        "--cloud-provider=fake".to_owned(),
        format!("--cloud-config={}", cloud_config.display()),
        "--leader-elect=true".to_owned(),
        "--use-service-account-credentials".to_owned(),
        "--allocate-node-cidrs=true".to_owned(),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
        "--configure-cloud-routes=true".to_owned(),
        "--controllers=*".to_owned(),
        "--profiling=false".to_owned(),
        "--feature-gates=CloudControllerManagerWebhook=false,LoggingBetaOptions=true".to_owned(),
        "--v=2".to_owned(),
    ];
    let ccm = Launch::new(BINARY, dir.path().join("ccm.log"))
        .args(args)
        .start()
        .await
        .expect("a kubeadm-style static pod's flags start it");

    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease = leases.get("cloud-controller-manager").await.unwrap();
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty()),
        "it leads"
    );
    let name = unique("kubeadm-node");
    let nodes: Api<Node> = Api::all(server.client());
    let mut node = uninitialized_node(&name);
    node.spec.get_or_insert_default().pod_cidr = Some("10.244.3.0/24".to_owned());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    eventually("the node initialized", WAIT, || async {
        let node = nodes.get(&name).await.ok()?;
        node.spec?.provider_id
    })
    .await
    .expect("a bounded wait");
    let (status, _) = ccm.get("/debug/pprof/").await.unwrap();
    assert_eq!(status, 404, "--profiling=false serves no profiles");
    let log = ccm.log();
    assert!(
        log.contains("CloudControllerManagerWebhook=false has no effect here"),
        "a gate that changes nothing here says so once: {log}"
    );
}
