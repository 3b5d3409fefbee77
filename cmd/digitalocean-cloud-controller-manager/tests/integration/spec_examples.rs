//! DigitalOcean's release manifest against DigitalOcean's own spec: Prism
//! in mock mode answers every call with the spec's examples (droplet
//! `stage.example.com` among them) and checks every request. Only
//! `DO_ACCESS_TOKEN` is set, as upstream's manifest sets it, plus where the
//! API and the droplet metadata service are (a loopback stand-in, never
//! 169.254.169.254).

use crate::support;

use ccm_provider_digitalocean::test_util::{harness, prism};
use ccm_test_support::{ApiServer, UNINITIALIZED, eventually, has_taint, load_balancer_service};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::PostParams;
use support::{WAIT, ccm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_manifest_initializes_the_specs_droplet_and_creates_a_load_balancer() {
    let mock = prism::start_mock().await.expect("Prism mock starts");
    let server = ApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(server.client());
    nodes
        .create(
            &PostParams::default(),
            &ccm_test_support::uninitialized_node("stage.example.com"),
        )
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    services
        .create(&PostParams::default(), &load_balancer_service("web", &[]))
        .await
        .unwrap();
    let env = [
        ("DO_ACCESS_TOKEN", "dop_v1_example".to_owned()),
        ("DO_OVERRIDE_URL", mock.url.clone()),
        (
            "DO_METADATA_URL",
            format!("{}/metadata/v1/region", harness().fake_url),
        ),
    ];
    let ccm = ccm::start(&server, &env, &["--leader-elect=false".to_owned()])
        .await
        .expect("it starts with the token alone");

    let node = eventually("stage.example.com initialized", WAIT, || async {
        nodes
            .get("stage.example.com")
            .await
            .ok()
            .filter(|n| !has_taint(n, UNINITIALIZED))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.log_tail()));
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("digitalocean://3164412"),
        "the spec's example droplet"
    );
    eventually("a load balancer created", WAIT, || async {
        (prism::received(&mock, "post", "/v2/load_balancers") > 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ccm.log_tail()));
    assert_eq!(
        prism::request_violations(&mock),
        Vec::<String>::new(),
        "every request matches the spec"
    );
}
