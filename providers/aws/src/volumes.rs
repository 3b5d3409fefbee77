//! EBS volumes for the PersistentVolume label controller: the volume ID a
//! PersistentVolume names (in-tree `awsElasticBlockStore` or the EBS CSI
//! driver's volume handle) and the zone and region of each volume, from
//! `DescribeVolumes` in batches of [`FILTER_VALUES`].
//!
//! Lookups filter on `volume-id` rather than passing `VolumeIds`: one unknown
//! ID in `VolumeIds` fails the whole call with `InvalidVolume.NotFound`,
//! while a filter simply does not match it. So a batch is one call (plus
//! pages, should AWS page), and a volume that does not exist answers
//! `Ok(None)` without costing the others their labels.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;

use async_trait::async_trait;
use aws_sdk_ec2::types::Volume;
use ccm_cloud_provider::k8s_openapi::api::core::v1::PersistentVolume;
use ccm_cloud_provider::{BatchResult, CloudError, Volumes};

use crate::api::ApiError;
use crate::instances::lookup::{FILTER_VALUES, filter};
use crate::provider::{AwsProvider, Cloud};

/// The EBS CSI driver's name, in `spec.csi.driver`.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// The zone label of a volume.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The region label of a volume.
const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// The EBS volume ID behind `pv`: `spec.awsElasticBlockStore.volumeID` (as
/// upstream's `KubernetesVolumeID`, `aws://<zone>/vol-…`, `aws:///vol-…` or
/// `vol-…`) or the volume handle of the EBS CSI driver. `None` for any other
/// volume, and for IDs not of the form `vol-<letters and digits>`.
pub(crate) fn volume_id_of(pv: &PersistentVolume) -> Option<String> {
    let spec = pv.spec.as_ref()?;
    if let Some(ebs) = &spec.aws_elastic_block_store {
        return ebs_volume_id(&ebs.volume_id).map(str::to_owned);
    }
    let csi = spec.csi.as_ref().filter(|c| c.driver == EBS_CSI_DRIVER)?;
    let id = csi.volume_handle.as_str();
    is_volume_id(id).then(|| id.to_owned())
}

/// Upstream's `MapToAWSVolumeID`: the volume ID in a Kubernetes volume ID,
/// which is `aws://<zone>/<id>` with the zone possibly empty, or a bare ID.
fn ebs_volume_id(name: &str) -> Option<&str> {
    let path = match name.strip_prefix("aws://") {
        // The host (the zone) is not needed: the volume is looked up anyway.
        Some(rest) => rest.split_once('/').map_or("", |(_zone, path)| path),
        None => name,
    };
    let id = path.trim_matches('/');
    is_volume_id(id).then_some(id)
}

/// Whether `id` looks like an EBS volume ID (`vol-12345678`,
/// `vol-0123456789abcdef0`).
fn is_volume_id(id: &str) -> bool {
    id.strip_prefix("vol-")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

impl Cloud {
    /// The volumes named by `ids` that exist, by ID: one `DescribeVolumes`
    /// per [`FILTER_VALUES`] IDs.
    async fn volumes_by_id(&self, ids: &[&str]) -> Result<HashMap<String, Volume>, ApiError> {
        let mut out = HashMap::new();
        for chunk in ids.chunks(FILTER_VALUES) {
            let filters = vec![filter("volume-id", chunk)];
            let volumes = self
                .api
                .paged(
                    "DescribeVolumes",
                    |token| {
                        self.api
                            .ec2
                            .describe_volumes()
                            .set_filters(Some(filters.clone()))
                            .set_next_token(token)
                            .send()
                    },
                    |page| {
                        (
                            page.volumes().to_vec(),
                            page.next_token().map(str::to_owned),
                        )
                    },
                )
                .await?;
            for volume in volumes {
                if let Some(id) = volume.volume_id() {
                    out.insert(id.to_owned(), volume);
                }
            }
        }
        Ok(out)
    }

    async fn volumes_labels(
        &self,
        ids: &[String],
    ) -> BatchResult<Option<BTreeMap<String, String>>> {
        let wanted: Vec<&str> = ids
            .iter()
            .map(String::as_str)
            .filter(|id| is_volume_id(id))
            .collect();
        let found = self.volumes_by_id(&wanted).await?;
        Ok(ids
            .iter()
            .map(|id| found.get(id).map(|v| self.labels(v)).transpose())
            .collect())
    }

    /// A volume's zone, and the provider's region: `DescribeVolumes` goes to
    /// the regional endpoint, so every volume it returns is in that region.
    /// (Upstream cut the zone's last letter off, which names no region for
    /// a Local Zone such as `us-west-2-lax-1a`.)
    fn labels(&self, volume: &Volume) -> Result<BTreeMap<String, String>, CloudError> {
        let zone = volume
            .availability_zone()
            .filter(|z| !z.is_empty())
            .ok_or_else(|| {
                CloudError::msg(format!(
                    "EBS volume {} has no availability zone",
                    volume.volume_id().unwrap_or_default()
                ))
            })?;
        Ok(BTreeMap::from([
            (ZONE_LABEL.to_owned(), zone.to_owned()),
            (REGION_LABEL.to_owned(), self.region.clone()),
        ]))
    }
}

#[async_trait]
impl Volumes for AwsProvider {
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        volume_id_of(pv)
    }

    /// AWS takes 200 values per `DescribeVolumes` filter.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(FILTER_VALUES).unwrap_or(NonZeroUsize::MIN)
    }

    /// One `DescribeVolumes` per 200 IDs. An ID AWS does not know (or that
    /// is not an EBS volume ID) answers `Ok(None)`.
    async fn volumes_labels(
        &self,
        ids: &[String],
    ) -> BatchResult<Option<BTreeMap<String, String>>> {
        self.cloud()?.volumes_labels(ids).await
    }
}

#[cfg(test)]
mod tests {
    use ccm_cloud_provider::k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource,
        PersistentVolumeSpec,
    };

    use super::*;

    fn in_tree(volume_id: &str) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                    volume_id: volume_id.to_owned(),
                    ..AWSElasticBlockStoreVolumeSource::default()
                }),
                ..PersistentVolumeSpec::default()
            }),
            ..PersistentVolume::default()
        }
    }

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

    #[test]
    fn in_tree_volume_ids_are_read_with_or_without_the_aws_prefix() {
        for name in [
            "aws://us-east-1b/vol-0123456789abcdef0",
            "aws:///vol-0123456789abcdef0",
            "vol-0123456789abcdef0",
            "/vol-0123456789abcdef0",
        ] {
            assert_eq!(
                volume_id_of(&in_tree(name)).as_deref(),
                Some("vol-0123456789abcdef0"),
                "{name}"
            );
        }
    }

    #[test]
    fn ebs_csi_volume_handles_are_volume_ids() {
        assert_eq!(
            volume_id_of(&csi(EBS_CSI_DRIVER, "vol-12345678")).as_deref(),
            Some("vol-12345678")
        );
    }

    #[test]
    fn malformed_ids_and_other_volumes_are_not_ebs() {
        for name in [
            "",
            "vol-",
            "aws://us-east-1b",
            "aws://us-east-1b/",
            "aws://us-east-1b/x/vol-123",
            "gce://vol-123",
            "snap-0123",
            "vol-12 34",
        ] {
            assert_eq!(volume_id_of(&in_tree(name)), None, "{name:?}");
        }
        assert_eq!(volume_id_of(&csi("pd.csi.storage.gke.io", "vol-123")), None);
        assert_eq!(volume_id_of(&csi(EBS_CSI_DRIVER, "aws:///vol-123")), None);
        let gce = PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                    pd_name: "disk-1".into(),
                    ..GCEPersistentDiskVolumeSource::default()
                }),
                ..PersistentVolumeSpec::default()
            }),
            ..PersistentVolume::default()
        };
        assert_eq!(volume_id_of(&gce), None);
        assert_eq!(volume_id_of(&PersistentVolume::default()), None);
    }
}
