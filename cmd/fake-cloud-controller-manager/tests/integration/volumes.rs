//! End to end: the real binary labels a PersistentVolume of a volume seeded
//! in its cloud config, under the chart's RBAC, on the API server the
//! environment asks for (in-memory, or kube-apiserver with
//! `CCM_TEST_APISERVER=real`).

use std::time::Duration;

use ccm_test_support::{ApiServer, Launch, eventually, unique};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams, PostParams};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

fn persistent_volume(name: &str, handle: &str) -> PersistentVolume {
    ccm_test_support::csi_persistent_volume(name, "fake.csi.ccm.dev", handle)
}

#[tokio::test]
async fn a_seeded_volume_gets_its_zone_region_and_node_affinity() {
    let server = ApiServer::start().await.unwrap();
    let credentials = server.ccm_credentials("fake").await.unwrap();
    let client = server.client();
    let cluster = unique("pvl");
    let name = format!("{cluster}-pv");
    let volumes: Api<PersistentVolume> = Api::all(client);
    volumes
        .create(&PostParams::default(), &persistent_volume(&name, "vol-e2e"))
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let cloud_config = dir.path().join("cloud.toml");
    std::fs::write(
        &cloud_config,
        "[[volumes]]\nid = \"vol-e2e\"\nzone = \"fake-1b\"\nregion = \"fake-1\"\n",
    )
    .unwrap();
    let _ccm = Launch::new(BINARY, dir.path().join("ccm.log"))
        .credentials(&credentials)
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            format!("--cluster-name={cluster}"),
            "--configure-cloud-routes=false".to_owned(),
            "--controllers=persistentvolume-label".to_owned(),
        ])
        .start()
        .await
        .expect("the CCM starts and is ready");

    let pv = eventually("the PersistentVolume labelled", WAIT, || async {
        let pv = volumes.get(&name).await.ok()?;
        pv.metadata
            .labels
            .as_ref()?
            .contains_key(REGION)
            .then_some(pv)
    })
    .await
    .unwrap();
    let labels = pv.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(ZONE).map(String::as_str), Some("fake-1b"));
    assert_eq!(labels.get(REGION).map(String::as_str), Some("fake-1"));
    assert_eq!(
        labels
            .get("failure-domain.beta.kubernetes.io/zone")
            .map(String::as_str),
        Some("fake-1b")
    );
    let term = &pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .expect("a node affinity was set")
        .node_selector_terms[0];
    let expression = &term.match_expressions.as_ref().unwrap()[0];
    assert_eq!(expression.key, ZONE);
    assert_eq!(
        expression.values.as_deref(),
        Some(&["fake-1b".to_owned()][..])
    );

    volumes
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
}
