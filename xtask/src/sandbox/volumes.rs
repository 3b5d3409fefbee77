//! The sandbox's PersistentVolumes: one already labelled and one that the
//! persistentvolume-label controller must label, both CSI volumes of the
//! fake cloud (driver `fake.csi.ccm.dev`, the handle its volume ID).

use std::net::SocketAddr;

use anyhow::ensure;
use serde_json::{Value, json};

use crate::http;

/// The fake cloud's CSI driver.
pub(crate) const CSI_DRIVER: &str = "fake.csi.ccm.dev";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The fake cloud's volumes behind the seeded PersistentVolumes, as
/// `[[volumes]]` entries of its cloud config.
pub(crate) const CLOUD_CONFIG_VOLUMES: &str = "\
[[volumes]]
id = \"vol-labelled\"
zone = \"fake-region-1a\"
region = \"fake-region-1\"

[[volumes]]
id = \"vol-unlabelled\"
zone = \"fake-region-1b\"
region = \"fake-region-1\"
";

fn persistent_volume(name: &str, handle: &str, labels: &Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": { "driver": CSI_DRIVER, "volumeHandle": handle },
        },
    })
}

/// Creates `pv-labelled` (zone and region set, as an operator would) and
/// `pv-unlabelled`, with `token` when given.
pub(crate) fn seed(api: SocketAddr, token: Option<&str>) -> anyhow::Result<()> {
    let labelled = persistent_volume(
        "pv-labelled",
        "vol-labelled",
        &json!({ ZONE: "fake-region-1a", REGION: "fake-region-1" }),
    );
    let unlabelled = persistent_volume("pv-unlabelled", "vol-unlabelled", &json!({}));
    for pv in [labelled, unlabelled] {
        let response = http::request_as(
            api,
            "POST",
            "/api/v1/persistentvolumes",
            Some(("application/json", &pv.to_string())),
            token,
        )?;
        ensure!(
            response.status == 201,
            "creating PersistentVolume {}: HTTP {}: {}",
            pv["metadata"]["name"],
            response.status,
            response.body
        );
    }
    Ok(())
}

/// How many of `volumes` are the fake cloud's, and how many of those carry
/// both topology labels.
pub(crate) fn labelled(volumes: &[Value]) -> (usize, usize) {
    let ours: Vec<_> = volumes
        .iter()
        .filter(|pv| pv["spec"]["csi"]["driver"] == CSI_DRIVER)
        .collect();
    let labelled = ours
        .iter()
        .filter(|pv| pv["metadata"]["labels"][ZONE].is_string())
        .filter(|pv| pv["metadata"]["labels"][REGION].is_string())
        .count();
    (ours.len(), labelled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fake_clouds_volumes_with_both_labels_count() {
        let volumes = [
            persistent_volume("a", "vol-a", &json!({ ZONE: "z", REGION: "r" })),
            persistent_volume("b", "vol-b", &json!({ ZONE: "z" })),
            json!({ "spec": { "csi": { "driver": "other" } } }),
        ];
        assert_eq!(labelled(&volumes), (2, 1));
    }
}
