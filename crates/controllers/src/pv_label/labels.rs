//! What the persistentvolume-label controller adds to a PersistentVolume:
//! pure functions over the volume and the cloud's labels.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::{Value, json};

/// `topology.kubernetes.io/zone`.
pub(crate) const ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub(crate) const REGION: &str = "topology.kubernetes.io/region";
/// The deprecated zone label kube-apiserver's `PersistentVolumeLabel`
/// admission plugin set, still read by older schedulers and tools.
pub(crate) const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// The deprecated region label, likewise.
pub(crate) const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

/// Multi-zone volumes name their zones joined by this (upstream's
/// `volumehelpers.LabelZonesToSet`).
const ZONE_SEPARATOR: &str = "__";

fn labels(pv: &PersistentVolume) -> Option<&BTreeMap<String, String>> {
    pv.metadata.labels.as_ref()
}

/// Whether the volume already has both topology labels: such a volume
/// costs no cloud call.
pub(crate) fn is_labelled(pv: &PersistentVolume) -> bool {
    labels(pv).is_some_and(|l| l.contains_key(ZONE) && l.contains_key(REGION))
}

/// The labels to add: the cloud's, with the deprecated `failure-domain`
/// pair mirroring zone and region, minus every key the volume already has
/// (a label someone set is never overwritten, whatever its value).
pub(crate) fn additions(
    pv: &PersistentVolume,
    cloud: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut wanted = cloud.clone();
    for (ga, beta) in [(ZONE, BETA_ZONE), (REGION, BETA_REGION)] {
        if let Some(value) = cloud.get(ga) {
            wanted
                .entry(beta.to_owned())
                .or_insert_with(|| value.clone());
        }
    }
    let existing = labels(pv);
    wanted.retain(|k, _| !existing.is_some_and(|l| l.contains_key(k)));
    wanted
}

/// The merge patch for `additions` and, when the volume has no
/// `spec.nodeAffinity` at all, a required term `zone In [zones]` from the
/// zone the volume ends up labelled with. `None` when there is nothing to
/// write.
///
/// kube-apiserver lets an update set `spec.nodeAffinity` only when it was
/// unset; an existing affinity is immutable, so it is never touched.
///
/// The patch carries the resourceVersion the decision was made on: a
/// label someone adds meanwhile makes it fail with a conflict (and a
/// retry) instead of being overwritten.
pub(crate) fn patch(pv: &PersistentVolume, additions: &BTreeMap<String, String>) -> Option<Value> {
    let zone = labels(pv)
        .and_then(|l| l.get(ZONE))
        .or_else(|| additions.get(ZONE));
    let affinity = zone.filter(|_| {
        pv.spec
            .as_ref()
            .is_none_or(|spec| spec.node_affinity.is_none())
    });
    if additions.is_empty() && affinity.is_none() {
        return None;
    }
    let mut patch = json!({
        "metadata": {"resourceVersion": pv.metadata.resource_version},
    });
    if !additions.is_empty() {
        patch["metadata"]["labels"] = json!(additions);
    }
    if let Some(zone) = affinity {
        let zones: Vec<&str> = zone.split(ZONE_SEPARATOR).collect();
        patch["spec"] = json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}
        ]}}});
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeSpec, VolumeNodeAffinity};

    fn pv(labels: &[(&str, &str)], affinity: bool) -> PersistentVolume {
        let mut pv = PersistentVolume::default();
        pv.metadata.resource_version = Some("7".into());
        if !labels.is_empty() {
            pv.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
        }
        pv.spec = Some(PersistentVolumeSpec {
            node_affinity: affinity.then(VolumeNodeAffinity::default),
            ..PersistentVolumeSpec::default()
        });
        pv
    }

    fn cloud() -> BTreeMap<String, String> {
        [(ZONE, "zone-b"), (REGION, "region-1")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn unlabelled_volume_gets_both_pairs_and_a_zone_affinity() {
        let pv = pv(&[], false);
        let add = additions(&pv, &cloud());
        assert_eq!(add.len(), 4);
        assert_eq!(add[BETA_ZONE], "zone-b");
        assert_eq!(add[BETA_REGION], "region-1");
        let patch = patch(&pv, &add).unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
                [0],
            json!({"key": ZONE, "operator": "In", "values": ["zone-b"]})
        );
    }

    #[test]
    fn a_hand_set_zone_is_kept_and_drives_the_affinity() {
        let pv = pv(&[(ZONE, "mine")], false);
        let add = additions(&pv, &cloud());
        assert!(!add.contains_key(ZONE));
        let patch = patch(&pv, &add).unwrap();
        assert_eq!(
            patch["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
                [0]["values"],
            json!(["mine"])
        );
    }

    #[test]
    fn an_existing_affinity_is_never_touched() {
        let pv = pv(&[], true);
        let patch = patch(&pv, &additions(&pv, &cloud())).unwrap();
        assert!(patch.get("spec").is_none());
    }

    #[test]
    fn multi_zone_values_split_into_the_affinity() {
        let pv = pv(&[(ZONE, "a__b"), (REGION, "r")], false);
        assert!(is_labelled(&pv));
        let patch = patch(&pv, &BTreeMap::new()).unwrap();
        assert_eq!(
            patch["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
                [0]["values"],
            json!(["a", "b"])
        );
    }

    #[test]
    fn nothing_to_add_is_no_patch() {
        let pv = pv(
            &[
                (ZONE, "z"),
                (REGION, "r"),
                (BETA_ZONE, "z"),
                (BETA_REGION, "r"),
            ],
            true,
        );
        assert!(patch(&pv, &additions(&pv, &cloud())).is_none());
    }
}
