//! Persistent volumes: the topology labels of the cloud's volumes, so the
//! scheduler places a volume's pods where it can be attached (what
//! kube-apiserver's `PersistentVolumeLabel` admission plugin did in-tree).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::PersistentVolume;

use crate::BatchResult;

/// The labels the cloud gives its volumes.
///
/// # Contract for implementers
/// - [`Volumes::volume_id`] does no I/O: it reads the PersistentVolume's
///   source (an in-tree volume or a CSI volume handle of this cloud's
///   driver) and answers `None` for volumes of other clouds or drivers.
/// - [`Volumes::volumes_labels`] is called with at most
///   [`Volumes::max_batch_size`] IDs and answers one result per ID, in
///   input order: `Ok(None)` when the cloud has no such volume (the
///   controller warns and leaves the PersistentVolume alone), `Ok(Some(labels))`
///   otherwise, with at least `topology.kubernetes.io/zone` and
///   `topology.kubernetes.io/region` for a zonal volume.
#[async_trait]
pub trait Volumes: Send + Sync {
    /// The cloud's ID of the volume behind `pv`, or `None` when it is not
    /// one of this cloud's volumes.
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String>;

    /// The most IDs one [`Volumes::volumes_labels`] call takes.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::MIN
    }

    /// The labels of each volume in `ids`, in input order.
    async fn volumes_labels(&self, ids: &[String])
    -> BatchResult<Option<BTreeMap<String, String>>>;
}
