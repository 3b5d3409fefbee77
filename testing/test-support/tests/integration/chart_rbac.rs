//! `ApiServer::ccm_credentials` on the in-memory server: the chart's
//! ServiceAccount gets exactly the chart's rights, and a refusal of its
//! requests fails the test even when no CCM logged it.

use ccm_test_support::ApiServer;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ListParams};

/// A client for the CCM's kubeconfig.
async fn client_of(kubeconfig: &std::path::Path) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
#[should_panic(expected = "was refused by the test API server")]
async fn the_ccm_token_has_the_charts_rights_and_a_refusal_fails_the_test() {
    let server = ApiServer::start().await.unwrap();
    let credentials = server.ccm_credentials("fake").await.unwrap();
    assert!(credentials.rbac_limited);
    let ccm = client_of(&credentials.kubeconfig).await;
    Api::<Node>::all(ccm.clone())
        .list(&ListParams::default())
        .await
        .expect("the chart grants listing nodes");
    let refused = Api::<Secret>::all(ccm)
        .list(&ListParams::default())
        .await
        .expect_err("the chart grants nothing on Secrets");
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 403),
        "{refused}"
    );
    let ApiServer::Memory(memory) = &server else {
        panic!("a test of the in-memory server: unset CCM_TEST_APISERVER");
    };
    assert_eq!(
        memory.ccm_refusals().len(),
        1,
        "{:?}",
        memory.ccm_refusals()
    );
    // Dropping the server fails the test: the expected panic.
}
