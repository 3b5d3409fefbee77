//! End to end: the real binary labels a PersistentVolume of a DigitalOcean
//! block-storage volume with its region, from the fake API behind Prism.

use crate::support;

use ccm_provider_digitalocean::test_util::account;
use ccm_test_support::eventually;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use support::{Cluster, WAIT};

const REGION: &str = "topology.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";

fn persistent_volume(name: &str, handle: &str) -> PersistentVolume {
    ccm_test_support::csi_persistent_volume(name, "dobs.csi.digitalocean.com", handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_storage_volume_gets_its_region() {
    let account = account();
    let volume = "506f78a4-e098-11e5-ad9f-000f53306ae1";
    account.add_volume(volume, "nyc3");
    let cluster = Cluster::start(account, 0).await;
    let pvs: Api<PersistentVolume> = Api::all(cluster.server.client());
    pvs.create(&PostParams::default(), &persistent_volume("data", volume))
        .await
        .unwrap();

    let labelled = eventually("the PersistentVolume labelled", WAIT, || async {
        pvs.get("data").await.ok().filter(|pv| {
            pv.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(REGION))
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", cluster.ccm.log_tail()));
    let labels = labelled.metadata.labels.unwrap();
    assert_eq!(labels[REGION], "nyc3");
    assert!(
        !labels.contains_key(ZONE),
        "DigitalOcean volumes are regional"
    );
    assert_eq!(
        cluster
            .account
            .count("GET", &format!("/v2/volumes/{volume}")),
        1,
        "one lookup"
    );
    cluster.assert_contract_clean();
}
