//! Block storage volume labels through Prism: a PersistentVolume of the CSI
//! driver gets its volume's region from one valid volume lookup, a volume
//! the account does not have answers `None`, and other volumes are not
//! DigitalOcean's.

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudProvider;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use ccm_provider_digitalocean::DO_CSI_DRIVER;
use ccm_provider_digitalocean::test_util::{Account, account, prism};

const VOLUME: &str = "506f78a4-e098-11e5-ad9f-000f53306ae1";

fn csi(driver: &str, handle: &str) -> PersistentVolume {
    PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.to_owned(),
                volume_handle: handle.to_owned(),
                ..CSIPersistentVolumeSource::default()
            }),
            ..PersistentVolumeSpec::default()
        }),
        ..PersistentVolume::default()
    }
}

/// Every violation Prism logged in this test binary, requests and responses
/// alike.
fn violations(account: &Account) -> Vec<String> {
    std::fs::read_to_string(&account.harness.prism.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("Violation"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_csi_volume_gets_its_region_from_one_lookup_prism_finds_valid() {
    let account = account();
    account.add_volume(VOLUME, "nyc3");
    let provider = account.provider().await;
    let volumes = provider.volumes().expect("DigitalOcean labels volumes");
    account.clear_requests();

    let id = volumes
        .volume_id(&csi(DO_CSI_DRIVER, VOLUME))
        .expect("a DigitalOcean volume");
    let answers = volumes
        .volumes_labels(std::slice::from_ref(&id))
        .await
        .expect("answered");

    assert_eq!(answers.len(), 1);
    assert_eq!(
        answers[0].as_ref().expect("no error"),
        &Some(BTreeMap::from([(
            "topology.kubernetes.io/region".to_owned(),
            "nyc3".to_owned()
        )])),
        "the region slug, as nodes get it, and no zone: DigitalOcean has none"
    );
    assert_eq!(account.count("GET", &format!("/v2/volumes/{VOLUME}")), 1);
    assert_eq!(account.requests().len(), 1);
    assert_eq!(
        prism::received(
            &account.harness.prism,
            "get",
            &format!("/v2/volumes/{VOLUME}")
        ),
        1
    );
    assert_eq!(violations(&account), Vec::<String>::new());
}

#[tokio::test]
async fn a_volume_the_account_does_not_have_answers_none() {
    let account = account();
    account.add_volume(VOLUME, "nyc3");
    let provider = account.provider().await;
    let volumes = provider.volumes().expect("DigitalOcean labels volumes");

    let unknown = "7724db7c-e098-11e5-b522-000f53304e51".to_owned();
    let answers = volumes
        .volumes_labels(std::slice::from_ref(&unknown))
        .await
        .expect("answered");
    assert!(matches!(answers[..], [Ok(None)]), "{answers:?}");
    assert_eq!(account.count("GET", &format!("/v2/volumes/{unknown}")), 1);
    assert_eq!(violations(&account), Vec::<String>::new());
}

#[tokio::test]
async fn volumes_of_other_drivers_are_not_digitalocean_volumes() {
    let account = account();
    let provider = account.provider().await;
    let volumes = provider.volumes().expect("DigitalOcean labels volumes");
    assert_eq!(volumes.volume_id(&csi("ebs.csi.aws.com", VOLUME)), None);
    assert_eq!(volumes.volume_id(&csi(DO_CSI_DRIVER, "not-a-uuid")), None);
    assert_eq!(volumes.volume_id(&PersistentVolume::default()), None);
    assert_eq!(volumes.max_batch_size().get(), 1);
}
