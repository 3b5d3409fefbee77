//! End to end against moto: the real binary labels PersistentVolumes of an
//! EBS volume, in-tree and CSI, with its zone and region, and leaves a
//! hand-set zone label alone.

use crate::support;

use std::time::Duration;

use ccm_test_support::eventually;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use support::E2e;

const WAIT: Duration = Duration::from_secs(60);
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

fn persistent_volume(
    name: &str,
    source: &serde_json::Value,
    labels: &serde_json::Value,
) -> PersistentVolume {
    let mut spec = serde_json::json!({
        "capacity": { "storage": "1Gi" },
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
    });
    spec.as_object_mut()
        .unwrap()
        .extend(source.as_object().unwrap().clone());
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": { "name": name, "labels": labels },
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ebs_volumes_get_their_zone_and_region() {
    let e2e = E2e::start("volumes", 1, &[]).await.unwrap();
    let volume = e2e
        .ec2
        .create_volume()
        .availability_zone("us-east-1b")
        .size(1)
        .send()
        .await
        .unwrap()
        .volume_id
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(e2e.client.clone());
    let cases = [
        (
            "in-tree",
            serde_json::json!({"awsElasticBlockStore": {"volumeID": format!("aws://us-east-1b/{volume}")}}),
            serde_json::json!({}),
        ),
        (
            "csi",
            serde_json::json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": volume}}),
            serde_json::json!({}),
        ),
        (
            "by-hand",
            serde_json::json!({"awsElasticBlockStore": {"volumeID": volume}}),
            serde_json::json!({ZONE: "my-zone"}),
        ),
    ];
    for (name, source, labels) in &cases {
        pvs.create(
            &PostParams::default(),
            &persistent_volume(name, source, labels),
        )
        .await
        .unwrap();
    }
    for (name, want_zone) in [
        ("in-tree", "us-east-1b"),
        ("csi", "us-east-1b"),
        ("by-hand", "my-zone"),
    ] {
        let labels = eventually(&format!("{name} labelled"), WAIT, || async {
            pvs.get(name)
                .await
                .ok()
                .and_then(|pv| pv.metadata.labels)
                .filter(|l| l.contains_key(REGION))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", e2e.ccm.log_tail()));
        assert_eq!(labels[REGION], "us-east-1", "{name}");
        assert_eq!(labels[ZONE], want_zone, "{name}: a hand-set zone is kept");
    }
}
