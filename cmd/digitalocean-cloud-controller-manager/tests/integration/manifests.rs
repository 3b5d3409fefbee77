//! Started as DigitalOcean's own release manifest starts it: only
//! `DO_ACCESS_TOKEN` in the environment and `--leader-elect=false`. A pod
//! gets its API server from the in-cluster config and its region from the
//! droplet metadata service; a test has neither, so it adds `--kubeconfig`,
//! `REGION` and `DO_OVERRIDE_URL` (the fake API), and nothing else.
//!
//! And a manifest written for upstream applies: the admission webhook
//! denies only what upstream also fails the Service on ([`admission`]).

#[path = "manifests/admission.rs"]
mod admission;
use crate::support;

use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use ccm_test_support::{ApiServer, UNINITIALIZED, eventually, has_taint};
use support::{REGION, WAIT, ccm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_manifest_starts_and_initializes_a_node_without_a_cluster_id() {
    let account = account();
    account.add_droplet(FakeDroplet::new(4001, "node-1"));
    let server = ApiServer::with_nodes(1).await.unwrap();
    let env = [
        ("DO_ACCESS_TOKEN", account.token.clone()),
        ("DO_OVERRIDE_URL", account.harness.prism_url.clone()),
        ("REGION", REGION.to_owned()),
    ];
    let ccm = ccm::start(&server, &env, &["--leader-elect=false".to_owned()])
        .await
        .expect("it starts as upstream's manifest runs it");
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(server.client());
    let node = eventually("node-1 initialized", WAIT, || async {
        nodes
            .get("node-1")
            .await
            .ok()
            .filter(|n| !has_taint(n, UNINITIALIZED))
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("digitalocean://4001")
    );
    assert!(
        !ccm.log().contains("--allow-untagged-cloud"),
        "no cluster ID is needed, as upstream: {}",
        ccm.log()
    );
}
