//! EBS volume labels against moto: PersistentVolumes naming a volume in
//! either in-tree form or through the EBS CSI driver get its zone and region,
//! a batch costs one `DescribeVolumes`, and a volume AWS does not know
//! answers `None` without costing the rest of its batch their labels.

use std::collections::BTreeMap;

use ccm_cloud_provider::CloudProvider;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, NFSVolumeSource, PersistentVolume,
    PersistentVolumeSpec,
};
use ccm_provider_aws::EBS_CSI_DRIVER;
use ccm_provider_aws::test_util::{REGION, ec2, moto, provider};

const ZONE: &str = "us-east-1b";

async fn create_volumes(ec2: &aws_sdk_ec2::Client, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let out = ec2
            .create_volume()
            .availability_zone(ZONE)
            .size(1)
            .send()
            .await
            .expect("volume created");
        ids.push(out.volume_id().expect("a volume ID").to_owned());
    }
    ids
}

fn pv(spec: PersistentVolumeSpec) -> PersistentVolume {
    PersistentVolume {
        spec: Some(spec),
        ..PersistentVolume::default()
    }
}

fn in_tree(volume_id: &str) -> PersistentVolume {
    pv(PersistentVolumeSpec {
        aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
            volume_id: volume_id.to_owned(),
            ..AWSElasticBlockStoreVolumeSource::default()
        }),
        ..PersistentVolumeSpec::default()
    })
}

fn csi(driver: &str, handle: &str) -> PersistentVolume {
    pv(PersistentVolumeSpec {
        csi: Some(CSIPersistentVolumeSource {
            driver: driver.to_owned(),
            volume_handle: handle.to_owned(),
            ..CSIPersistentVolumeSource::default()
        }),
        ..PersistentVolumeSpec::default()
    })
}

fn zonal_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "topology.kubernetes.io/region".to_owned(),
            REGION.to_owned(),
        ),
        ("topology.kubernetes.io/zone".to_owned(), ZONE.to_owned()),
    ])
}

/// `DescribeVolumes` calls so far, from the provider's request metrics
/// (upstream's name for them, `describe_volume`).
fn describe_volumes_calls(provider: &dyn CloudProvider) -> u64 {
    let mut text = String::new();
    provider.encode_metrics(&mut text);
    text.lines()
        .filter_map(|l| {
            l.strip_prefix(
                "cloudprovider_aws_api_request_duration_seconds_count{request=\"describe_volume\"} ",
            )
        })
        .map(|count| count.trim().parse::<u64>().expect("a count"))
        .sum()
}

#[tokio::test]
async fn in_tree_and_csi_persistent_volumes_get_their_volumes_zone_and_region() {
    let moto = moto().await;
    let ids = create_volumes(&ec2(&moto), 1).await;
    let id = &ids[0];
    let provider = provider(&moto, "").await;
    let volumes = provider.volumes().expect("AWS labels volumes");

    for pv in [
        in_tree(&format!("aws://{ZONE}/{id}")),
        in_tree(&format!("aws:///{id}")),
        in_tree(id),
        csi(EBS_CSI_DRIVER, id),
    ] {
        let found = volumes.volume_id(&pv);
        assert_eq!(found.as_ref(), Some(id), "{pv:?}");
        let labels = volumes
            .volumes_labels(std::slice::from_ref(id))
            .await
            .expect("answered")
            .pop()
            .expect("one answer")
            .expect("labelled");
        assert_eq!(labels, Some(zonal_labels()));
    }
}

#[tokio::test]
async fn volumes_of_other_kinds_are_not_ebs() {
    let moto = moto().await;
    let provider = provider(&moto, "").await;
    let volumes = provider.volumes().expect("AWS labels volumes");
    let nfs = pv(PersistentVolumeSpec {
        nfs: Some(NFSVolumeSource {
            server: "10.0.0.1".into(),
            path: "/exports".into(),
            ..NFSVolumeSource::default()
        }),
        ..PersistentVolumeSpec::default()
    });
    assert_eq!(volumes.volume_id(&nfs), None);
    assert_eq!(
        volumes.volume_id(&csi("efs.csi.aws.com", "fs-12345678")),
        None
    );
    assert_eq!(volumes.volume_id(&in_tree("not-a-volume")), None);
}

#[tokio::test]
async fn a_batch_with_an_unknown_volume_labels_the_rest_in_one_call() {
    let moto = moto().await;
    let ids = create_volumes(&ec2(&moto), 2).await;
    let provider = provider(&moto, "").await;
    let volumes = provider.volumes().expect("AWS labels volumes");

    let unknown = "vol-0000000000000dead".to_owned();
    let batch = [ids[0].clone(), unknown, ids[1].clone()];
    let answers: Vec<_> = volumes
        .volumes_labels(&batch)
        .await
        .expect("answered")
        .into_iter()
        .map(|r| r.expect("no per-volume error"))
        .collect();
    assert_eq!(
        answers,
        [Some(zonal_labels()), None, Some(zonal_labels())],
        "in input order"
    );
    assert_eq!(describe_volumes_calls(&*provider), 1);
}

#[tokio::test]
async fn batches_of_volumes_cost_one_describe_volumes_call_each() {
    let moto = moto().await;
    let ids = create_volumes(&ec2(&moto), 250).await;
    let provider = provider(&moto, "").await;
    let volumes = provider.volumes().expect("AWS labels volumes");
    let batch = volumes.max_batch_size().get();

    let mut labelled = 0;
    for chunk in ids.chunks(batch) {
        let answers = volumes.volumes_labels(chunk).await.expect("answered");
        assert_eq!(answers.len(), chunk.len());
        for answer in answers {
            assert_eq!(answer.expect("no per-volume error"), Some(zonal_labels()));
            labelled += 1;
        }
    }
    assert_eq!(labelled, 250);
    let calls = describe_volumes_calls(&*provider);
    println!("250 volumes in batches of {batch}: {calls} DescribeVolumes calls");
    assert_eq!(calls, 250u64.div_ceil(batch as u64));
}
