//! The fake's `Volumes`: block volumes held in memory, named in
//! PersistentVolumes by CSI volume handles of the driver [`CSI_DRIVER`].

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::PersistentVolume;
use ccm_cloud_provider::{BatchResult, Volumes};

use crate::{FakeCloud, Operation};

/// The CSI driver whose volume handles are the fake cloud's volume IDs
/// (`spec.csi.driver`; `spec.csi.volumeHandle` is the volume's ID).
pub const CSI_DRIVER: &str = "fake.csi.ccm.dev";

/// `topology.kubernetes.io/zone`.
const ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
const REGION: &str = "topology.kubernetes.io/region";

/// A fake block volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeVolume {
    /// Its ID, the CSI volume handle.
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Its region.
    pub region: String,
    /// Further labels a PersistentVolume of it gets.
    pub labels: BTreeMap<String, String>,
}

impl FakeVolume {
    /// A volume in `zone` of `region`, without further labels.
    pub fn new(id: impl Into<String>, zone: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            zone: zone.into(),
            region: region.into(),
            labels: BTreeMap::new(),
        }
    }

    /// The labels the cloud gives the volume: its own, then zone and region.
    fn topology_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        // A regional volume (no zone, as on DigitalOcean) gives the region only.
        if !self.zone.is_empty() {
            labels.insert(ZONE.into(), self.zone.clone());
        }
        labels.insert(REGION.into(), self.region.clone());
        labels
    }
}

/// The ID of `pv`'s volume: its CSI volume handle when the driver is
/// [`CSI_DRIVER`].
pub(crate) fn volume_id(pv: &PersistentVolume) -> Option<String> {
    let csi = pv.spec.as_ref()?.csi.as_ref()?;
    (csi.driver == CSI_DRIVER && !csi.volume_handle.is_empty()).then(|| csi.volume_handle.clone())
}

#[async_trait]
impl Volumes for FakeCloud {
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        volume_id(pv)
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(self.settings().volume_batch_size).unwrap_or(NonZeroUsize::MIN)
    }

    async fn volumes_labels(
        &self,
        ids: &[String],
    ) -> BatchResult<Option<BTreeMap<String, String>>> {
        self.enter(Operation::VolumesLabels, ids.to_vec(), Some(ids.len()))
            .await?;
        let state = self.state();
        Ok(ids
            .iter()
            .map(|id| Ok(state.volumes.get(id).map(FakeVolume::topology_labels)))
            .collect())
    }
}
