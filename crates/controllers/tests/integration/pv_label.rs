//! The persistentvolume-label controller against the test API server and
//! the fake cloud's volumes.

use crate::support;

use std::num::NonZeroUsize;
use std::sync::Arc;

use ccm_controllers::{ControllerId, ControllerSettings, Started};
use ccm_provider_fake::{CSI_DRIVER, Capability, FakeCloud, FakeVolume, Operation};
use ccm_runtime::{AlwaysLeader, Context, Informers, MeteredCloud, Metrics};
use ccm_test_support::cloud_call_count;
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, VolumeNodeAffinity,
};
use kube::api::{Api, ListParams, PostParams};
use support::{Harness, fast_settings};
use tokio_util::sync::CancellationToken;

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

fn pv(name: &str, driver: &str, handle: &str) -> PersistentVolume {
    ccm_test_support::csi_persistent_volume(name, driver, handle)
}

fn with_labels(mut pv: PersistentVolume, labels: &[(&str, &str)]) -> PersistentVolume {
    pv.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    pv
}

fn volumes(h: &Harness) -> Api<PersistentVolume> {
    Api::all(h.client.clone())
}

async fn create(h: &Harness, pv: &PersistentVolume) {
    volumes(h)
        .create(&PostParams::default(), pv)
        .await
        .expect("PersistentVolume created");
}

async fn get(h: &Harness, name: &str) -> PersistentVolume {
    volumes(h).get(name).await.expect("PersistentVolume read")
}

fn label<'a>(pv: &'a PersistentVolume, key: &str) -> Option<&'a str> {
    pv.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn zone_affinity(pv: &PersistentVolume) -> Option<Vec<String>> {
    let terms = &pv
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    let expr = terms.first()?.match_expressions.as_ref()?.first()?;
    (expr.key == ZONE && expr.operator == "In").then(|| expr.values.clone().unwrap_or_default())
}

async fn cloud_with_volumes(n: usize, batch: usize) -> Harness {
    let cloud = FakeCloud::default();
    cloud.set_volume_batch_size(NonZeroUsize::new(batch).unwrap());
    for i in 0..n {
        cloud.add_volume(FakeVolume::new(format!("vol-{i}"), "zone-b", "region-1"));
    }
    Harness::with_cloud(cloud).await
}

#[tokio::test]
async fn a_burst_of_250_unlabelled_volumes_costs_ceil_250_over_batch_calls() {
    let mut h = cloud_with_volumes(250, 50).await;
    for i in 0..250 {
        create(&h, &pv(&format!("pv-{i}"), CSI_DRIVER, &format!("vol-{i}"))).await;
    }
    h.start(&[ControllerId::PersistentVolumeLabel], &fast_settings())
        .await;
    h.settled().await;

    assert_eq!(
        h.cloud.count(Operation::VolumesLabels),
        5,
        "ceil(250 / 50) calls"
    );
    let all = volumes(&h)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(all.len(), 250);
    for pv in &all {
        assert_eq!(label(pv, ZONE), Some("zone-b"));
        assert_eq!(label(pv, REGION), Some("region-1"));
        assert_eq!(
            label(pv, "failure-domain.beta.kubernetes.io/zone"),
            Some("zone-b")
        );
        assert_eq!(
            label(pv, "failure-domain.beta.kubernetes.io/region"),
            Some("region-1")
        );
        assert_eq!(zone_affinity(pv), Some(vec!["zone-b".to_owned()]));
    }
    assert_eq!(
        cloud_call_count(&h.metrics, "volumes_labels", "success"),
        5,
        "every call counted by the metered cloud"
    );
}

#[tokio::test]
async fn a_zone_label_set_by_hand_is_kept() {
    let mut h = cloud_with_volumes(1, 50).await;
    create(
        &h,
        &with_labels(pv("pv-0", CSI_DRIVER, "vol-0"), &[(ZONE, "my-zone")]),
    )
    .await;
    h.start(&[ControllerId::PersistentVolumeLabel], &fast_settings())
        .await;
    h.settled().await;

    let pv = get(&h, "pv-0").await;
    assert_eq!(label(&pv, ZONE), Some("my-zone"), "a person's label wins");
    assert_eq!(label(&pv, REGION), Some("region-1"));
    assert_eq!(zone_affinity(&pv), Some(vec!["my-zone".to_owned()]));
}

#[tokio::test]
async fn an_existing_node_affinity_is_left_alone() {
    let mut h = cloud_with_volumes(1, 50).await;
    let mut volume = pv("pv-0", CSI_DRIVER, "vol-0");
    let affinity = VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".into(),
                    operator: "In".into(),
                    values: Some(vec!["node-1".into()]),
                }]),
                match_fields: None,
            }],
        }),
    };
    volume.spec.as_mut().unwrap().node_affinity = Some(affinity.clone());
    create(&h, &volume).await;
    h.start(&[ControllerId::PersistentVolumeLabel], &fast_settings())
        .await;
    h.settled().await;

    let pv = get(&h, "pv-0").await;
    assert_eq!(label(&pv, ZONE), Some("zone-b"));
    assert_eq!(pv.spec.unwrap().node_affinity, Some(affinity));
}

#[tokio::test]
async fn an_unknown_volume_gets_one_warning_no_patch_and_no_retries() {
    let mut h = cloud_with_volumes(0, 50).await;
    create(&h, &pv("pv-lost", CSI_DRIVER, "vol-missing")).await;
    let before = get(&h, "pv-lost").await.metadata.resource_version;
    h.start(&[ControllerId::PersistentVolumeLabel], &fast_settings())
        .await;
    h.settled().await;
    h.settled().await;

    assert_eq!(h.cloud.count(Operation::VolumesLabels), 1, "looked up once");
    let events = h.events("pv-lost", "VolumeNotFound").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let after = get(&h, "pv-lost").await;
    assert_eq!(after.metadata.resource_version, before, "no patch");
    assert_eq!(label(&after, ZONE), None);
}

/// A regional volume (DigitalOcean's have no zone): labelled with its
/// region once, without a zone or an affinity term, and not looked up
/// again at the next resync periods.
#[tokio::test]
async fn a_regional_volume_is_labelled_once_and_left_alone() {
    let cloud = FakeCloud::default();
    cloud.add_volume(FakeVolume::new("vol-r", "", "nyc3"));
    let mut h = Harness::with_cloud(cloud).await;
    create(&h, &pv("pv-r", CSI_DRIVER, "vol-r")).await;
    let settings = ControllerSettings {
        node_status_update_frequency: std::time::Duration::from_millis(100),
        ..fast_settings()
    };
    h.start(&[ControllerId::PersistentVolumeLabel], &settings)
        .await;
    // Quiescence spans several 100 ms resync periods: a volume requeued
    // for another lookup would keep the calls moving.
    h.settled().await;

    let pv = get(&h, "pv-r").await;
    assert_eq!(label(&pv, REGION), Some("nyc3"));
    assert_eq!(label(&pv, ZONE), None);
    assert_eq!(zone_affinity(&pv), None);
    assert_eq!(h.cloud.count(Operation::VolumesLabels), 1, "looked up once");
}

#[tokio::test]
async fn labelled_volumes_and_other_drivers_cost_no_call() {
    let mut h = cloud_with_volumes(2, 50).await;
    create(
        &h,
        &with_labels(
            pv("pv-labelled", CSI_DRIVER, "vol-0"),
            &[(ZONE, "zone-a"), (REGION, "region-1")],
        ),
    )
    .await;
    create(&h, &pv("pv-other", "ebs.csi.aws.com", "vol-1")).await;
    h.start(&[ControllerId::PersistentVolumeLabel], &fast_settings())
        .await;
    h.settled().await;

    assert_eq!(h.cloud.count(Operation::VolumesLabels), 0);
    assert_eq!(label(&get(&h, "pv-other").await, ZONE), None);
    assert_eq!(label(&get(&h, "pv-labelled").await, ZONE), Some("zone-a"));
}

#[tokio::test]
async fn the_controller_is_off_without_the_volumes_capability() {
    let h = Harness::new().await;
    let no_volumes = FakeCloud::default();
    no_volumes.set_capability(Capability::Volumes, false);
    let metrics = Metrics::new();
    let ctx = Context {
        client: h.client.clone(),
        cloud: Arc::new(MeteredCloud::new(
            Arc::new(no_volumes),
            metrics.clone(),
            Arc::new(AlwaysLeader),
        )),
        metrics,
        cluster_name: "test-cluster".into(),
        identity: "test-ccm".into(),
        informers: Arc::new(Informers::new(h.client.clone())),
        shutdown: CancellationToken::new(),
    };
    match ccm_controllers::start(ControllerId::PersistentVolumeLabel, &ctx, &fast_settings()) {
        Started::Off(reason) => assert!(reason.contains("volumes"), "{reason}"),
        Started::Running(_) => panic!("started without the volumes capability"),
    }
}
