//! A fake instance: what the fake cloud knows about the machine behind a
//! node, and the provider ID it gives one by default.

use std::collections::BTreeMap;

use ccm_cloud_provider::{InstanceMetadata, NodeAddress};
use serde::Deserialize;

/// The life-cycle state of a fake instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Running: exists, not shut down.
    #[default]
    Running,
    /// Stopped: exists, shut down.
    Stopped,
    /// Terminated: does not exist any more.
    Terminated,
}

/// A fake instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The node name it answers to.
    pub name: String,
    /// Its provider ID.
    pub provider_id: String,
    /// Its instance type.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// Its region.
    pub region: String,
    /// Its addresses, in order.
    pub addresses: Vec<NodeAddress>,
    /// Running, stopped or terminated.
    pub state: InstanceState,
    /// Additional labels for its node.
    pub labels: BTreeMap<String, String>,
}

impl Instance {
    pub(crate) fn metadata(&self) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: self.provider_id.clone(),
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            region: self.region.clone(),
            node_addresses: self.addresses.clone(),
            additional_labels: self.labels.clone(),
            node_names: vec![self.name.clone()],
        }
    }
}

/// The provider ID the fake gives an instance named `name`.
pub(crate) fn default_provider_id(name: &str) -> String {
    format!("fake://{name}")
}
