//! Volumes: seeded from the cloud config, named by CSI volume handles of
//! the fake's driver, answered in batches.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use ccm_cloud_provider::{CloudConfig, Volumes};
use ccm_provider_fake::{CSI_DRIVER, FakeCloud, FakeConfig, Operation};

fn parse(text: &str) -> Result<FakeConfig, String> {
    FakeConfig::parse(&CloudConfig::new("/etc/kubernetes/cloud.conf", text))
        .map_err(|e| e.to_string())
}

fn csi_volume(driver: &str, handle: &str) -> PersistentVolume {
    PersistentVolume {
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..CSIPersistentVolumeSource::default()
            }),
            ..PersistentVolumeSpec::default()
        }),
        ..PersistentVolume::default()
    }
}

#[tokio::test]
async fn seeded_volumes_answer_with_zone_region_and_their_labels() {
    let config = parse(
        r#"
[settings]
region = "r-1"
zones = ["r-1a", "r-1b"]
volume_batch_size = 2

[[volumes]]
id = "vol-1"
zone = "r-1b"
labels = { "fake.example/tier" = "fast" }

[[volumes]]
id = "vol-2"
"#,
    )
    .unwrap();
    let cloud = FakeCloud::new(config);
    assert_eq!(
        Volumes::max_batch_size(&cloud),
        NonZeroUsize::new(2).unwrap()
    );
    let ids = ["vol-1".to_owned(), "vol-2".to_owned()];
    let answers = cloud.volumes_labels(&ids).await.unwrap();
    let labels =
        |i: usize| -> BTreeMap<String, String> { answers[i].as_ref().unwrap().clone().unwrap() };
    assert_eq!(labels(0)["topology.kubernetes.io/zone"], "r-1b");
    assert_eq!(labels(0)["topology.kubernetes.io/region"], "r-1");
    assert_eq!(labels(0)["fake.example/tier"], "fast");
    assert_eq!(
        labels(1)["topology.kubernetes.io/zone"],
        "r-1a",
        "the first zone"
    );
    let unknown = cloud.volumes_labels(&["vol-9".to_owned()]).await.unwrap();
    assert!(matches!(unknown[0], Ok(None)), "no such volume");
    assert_eq!(cloud.count(Operation::VolumesLabels), 2);
}

#[test]
fn only_the_fake_drivers_handles_are_its_volumes() {
    let cloud = FakeCloud::default();
    assert_eq!(
        cloud.volume_id(&csi_volume(CSI_DRIVER, "vol-1")).as_deref(),
        Some("vol-1")
    );
    assert_eq!(
        cloud.volume_id(&csi_volume("ebs.csi.aws.com", "vol-1")),
        None
    );
    assert_eq!(cloud.volume_id(&csi_volume(CSI_DRIVER, "")), None);
    assert_eq!(cloud.volume_id(&PersistentVolume::default()), None);
}

#[test]
fn duplicate_and_empty_volume_ids_are_refused() {
    let twice = parse("[[volumes]]\nid = \"v\"\n[[volumes]]\nid = \"v\"\n").unwrap_err();
    assert!(twice.contains("volumes[1].id: is used twice"), "{twice}");
    let empty = parse("[[volumes]]\nid = \"\"\n").unwrap_err();
    assert!(
        empty.contains("volumes[0].id: must not be empty"),
        "{empty}"
    );
    let zero = parse("[settings]\nvolume_batch_size = 0\n").unwrap_err();
    assert!(zero.contains("settings.volume_batch_size"), "{zero}");
}
