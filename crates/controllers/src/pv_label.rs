//! The persistentvolume-label controller: gives each PersistentVolume
//! backed by this cloud its volume's zone and region labels, as
//! kube-apiserver's `PersistentVolumeLabel` admission plugin did in-tree,
//! so the scheduler places its pods where the volume can be attached.
//!
//! # Guarantees
//! - A volume that already has `topology.kubernetes.io/zone` and
//!   `topology.kubernetes.io/region`, or that is not this cloud's
//!   ([`ccm_cloud_provider::Volumes::volume_id`] is `None`), costs no cloud call.
//! - Lookups are batched: N unlabelled volumes cost ceil(N / batch)
//!   `volumes_labels` calls.
//! - One merge patch per volume, carrying the resourceVersion it was
//!   decided on: it adds only labels the volume lacks (a label a person set
//!   wins), the deprecated `failure-domain.beta.kubernetes.io` pair where
//!   the cloud gives zone and region, and a `zone In [zone]` node-affinity
//!   term only when the volume has no `spec.nodeAffinity` (the API server
//!   allows setting it only then).
//! - A volume the cloud does not know gets one Warning event
//!   (`VolumeNotFound`) and no write, and is not looked up again until the
//!   PersistentVolume changes.
//! - A volume the cloud gives a region but no zone (a regional volume, as
//!   on DigitalOcean) is done once it carries the cloud's labels: it is not
//!   looked up again while this process runs.
//! - A volume the cloud gives neither zone nor region is looked up again
//!   every `--node-status-update-frequency`; labelled ones never are.

mod labels;

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudProvider, Volumes};
use ccm_runtime::controller::Triggers;
use ccm_runtime::{Action, BatchCall, Batcher, Context, Events, MeteredCloud, ReconcileError};
use futures::FutureExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;

use crate::settings::ControllerSettings;
use crate::{ControllerId, Started};

/// How long the first lookup of a burst waits for others to share its call.
const BATCH_WINDOW: Duration = Duration::from_millis(100);
/// The component name of this controller's events.
const EVENT_SOURCE: &str = "persistentvolume-label-controller";

/// The cloud's labels for one volume, `None` when it has no such volume.
type VolumeLabels = Option<BTreeMap<String, String>>;

struct PvLabelController {
    api: Api<PersistentVolume>,
    cloud: Arc<MeteredCloud>,
    batcher: Batcher<VolumeLabels, String>,
    events: Events,
    /// PV UID → the resourceVersion at which the cloud did not know its
    /// volume: not looked up again until the PV changes.
    unknown: Mutex<HashMap<String, String>>,
    /// PV UID → the label keys the cloud gave it, for volumes without a
    /// zone: done while it carries them all.
    regional: Mutex<HashMap<String, Vec<String>>>,
    resync: Duration,
}

pub(crate) fn start(ctx: &Context, settings: &ControllerSettings) -> Started {
    let Some(volumes) = ctx.cloud.volumes() else {
        return Started::Off("the cloud provider has no volumes capability".into());
    };
    let max_batch = volumes.max_batch_size();
    let state = Arc::new(PvLabelController {
        api: Api::all(ctx.client.clone()),
        cloud: ctx.cloud.clone(),
        // One call at a time: lookups queued meanwhile fill the next batch.
        batcher: Batcher::spawn(call(ctx), max_batch, BATCH_WINDOW, NonZeroUsize::MIN),
        events: Events::new(ctx.client.clone(), EVENT_SOURCE, Some(ctx.identity.clone())),
        unknown: Mutex::default(),
        regional: Mutex::default(),
        resync: settings.node_status_update_frequency,
    });
    let informer = ctx.informers.persistent_volumes();
    crate::run_controller(
        ControllerId::PersistentVolumeLabel.name(),
        &informer,
        Triggers::default(),
        ctx,
        move |pv| state.clone().reconcile(pv),
    )
}

/// `volumes_labels`, as the batcher takes it.
fn call(ctx: &Context) -> BatchCall<VolumeLabels, String> {
    let cloud = ctx.cloud.clone();
    Arc::new(move |ids| {
        let cloud = cloud.clone();
        async move { cloud.volumes_labels(&ids).await }.boxed()
    })
}

impl PvLabelController {
    async fn reconcile(
        self: Arc<Self>,
        pv: Arc<PersistentVolume>,
    ) -> Result<Action, ReconcileError> {
        let uid = pv.uid().unwrap_or_default();
        if pv.metadata.deletion_timestamp.is_some() {
            self.unknown.lock().remove(&uid);
            self.regional.lock().remove(&uid);
            return Ok(Action::await_change());
        }
        let carries = |keys: &Vec<String>| {
            let have = pv.metadata.labels.as_ref();
            keys.iter().all(|k| have.is_some_and(|l| l.contains_key(k)))
        };
        if labels::is_labelled(&pv) || self.regional.lock().get(&uid).is_some_and(carries) {
            self.unknown.lock().remove(&uid);
            return Ok(Action::await_change());
        }
        let Some(id) = self.cloud.volume_id(&pv) else {
            return Ok(Action::await_change());
        };
        let version = pv.metadata.resource_version.clone().unwrap_or_default();
        if self.unknown.lock().get(&uid) == Some(&version) {
            return Ok(Action::await_change());
        }
        let name = pv.name_any();
        let Some(cloud_labels) = self.batcher.lookup(id.clone()).await? else {
            self.unknown.lock().insert(uid, version);
            let note = format!(
                "the cloud has no volume {id:?}; PersistentVolume {name} is left unlabelled until it changes"
            );
            self.events
                .warning(&pv.object_ref(&()), "VolumeNotFound", note)
                .await;
            return Ok(Action::await_change());
        };
        self.unknown.lock().remove(&uid);
        let additions = labels::additions(&pv, &cloud_labels);
        let labelled_after = {
            let mut after = pv.metadata.labels.clone().unwrap_or_default();
            after.extend(additions.clone());
            after.contains_key(labels::ZONE) && after.contains_key(labels::REGION)
        };
        let regional =
            !cloud_labels.contains_key(labels::ZONE) && cloud_labels.contains_key(labels::REGION);
        if regional {
            self.regional
                .lock()
                .insert(uid, cloud_labels.keys().cloned().collect());
        }
        if let Some(patch) = labels::patch(&pv, &additions) {
            self.api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            tracing::info!(volume = %name, %id, labels = ?additions, "labelled");
        }
        if labelled_after || regional {
            Ok(Action::await_change())
        } else {
            tracing::debug!(volume = %name, %id, "the cloud gave no zone or region; looking again later");
            Ok(Action::requeue(self.resync))
        }
    }
}
