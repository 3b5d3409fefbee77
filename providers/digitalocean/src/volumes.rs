//! Block storage volumes for the PersistentVolume label controller: the
//! volume a PersistentVolume of DigitalOcean's CSI driver names, and its
//! region.
//!
//! One `GET /v2/volumes/{volume_id}` per volume (a batch of one). Listing
//! `/v2/volumes` instead would cost a page per 200 of the account's volumes
//! for every batch however few PersistentVolumes are unlabelled (in a steady
//! state, none or one), and a region-filtered list would miss a volume in
//! another region rather than label it.
//!
//! Only `topology.kubernetes.io/region` is set, to the volume's region slug:
//! DigitalOcean regions have no zones, and nodes get the droplet's region
//! slug and no zone (as upstream's CCM), so a zone label on a volume would
//! match no node and leave its pods unschedulable.

use std::collections::BTreeMap;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::PersistentVolume;
use ccm_cloud_provider::{BatchResult, CloudError, Volumes};

use crate::DigitalOceanProvider;
use crate::api::types::VolumeEnvelope;

/// DigitalOcean's block storage CSI driver, in `spec.csi.driver`.
pub const DO_CSI_DRIVER: &str = "dobs.csi.digitalocean.com";

/// The region label of a volume.
const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// The volume ID behind `pv`: the volume handle of DigitalOcean's CSI
/// driver, when it is a UUID (as every volume ID is).
pub(crate) fn volume_id_of(pv: &PersistentVolume) -> Option<String> {
    let csi = pv.spec.as_ref()?.csi.as_ref()?;
    (csi.driver == DO_CSI_DRIVER && is_uuid(&csi.volume_handle)).then(|| csi.volume_handle.clone())
}

/// Whether `id` is a UUID in its hyphenated form (the API's `volume_id`
/// path parameter is `format: uuid`).
fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl DigitalOceanProvider {
    /// The labels of volume `id`; `None` when the account has no such volume.
    async fn volume_labels(
        &self,
        id: &str,
    ) -> Result<Option<BTreeMap<String, String>>, CloudError> {
        if !is_uuid(id) {
            return Ok(None);
        }
        let volume = match self
            .api
            .get::<VolumeEnvelope>(&format!("/v2/volumes/{id}"), &[])
            .await
        {
            Ok(found) => found.volume,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if volume.region.slug.is_empty() {
            return Err(CloudError::msg(format!(
                "DigitalOcean volume {id} has no region"
            )));
        }
        Ok(Some(BTreeMap::from([(
            REGION_LABEL.to_owned(),
            volume.region.slug,
        )])))
    }
}

#[async_trait]
impl Volumes for DigitalOceanProvider {
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        volume_id_of(pv)
    }

    /// One GET per volume; the batch size is the default, one.
    async fn volumes_labels(
        &self,
        ids: &[String],
    ) -> BatchResult<Option<BTreeMap<String, String>>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.volume_labels(id).await);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csi(driver: &str, handle: &str) -> PersistentVolume {
        ccm_test_support::csi_persistent_volume("pv", driver, handle)
    }

    #[test]
    fn the_csi_drivers_volume_handles_are_volume_ids() {
        let id = "506f78a4-e098-11e5-ad9f-000f53306ae1";
        assert_eq!(volume_id_of(&csi(DO_CSI_DRIVER, id)).as_deref(), Some(id));
    }

    #[test]
    fn other_drivers_and_malformed_handles_are_not_digitalocean_volumes() {
        let id = "506f78a4-e098-11e5-ad9f-000f53306ae1";
        assert_eq!(volume_id_of(&csi("ebs.csi.aws.com", id)), None);
        for handle in [
            "",
            "vol-123",
            "506f78a4e09811e5ad9f000f53306ae1",
            "506f78a4-e098-11e5-ad9f-000f53306ae",
            "506f78a4-e098-11e5-ad9f-000f53306ae1/x",
            "zzzzzzzz-e098-11e5-ad9f-000f53306ae1",
        ] {
            assert_eq!(
                volume_id_of(&csi(DO_CSI_DRIVER, handle)),
                None,
                "{handle:?}"
            );
        }
        assert_eq!(volume_id_of(&PersistentVolume::default()), None);
    }
}
