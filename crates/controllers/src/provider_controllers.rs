//! Controllers a provider adds to the generic ones
//! ([`ccm_cloud_provider::ProviderController`]), started by name when
//! `--controllers` names them: the cloud-agnostic behaviour here, the cloud's
//! part behind a capability.
//!
//! - [`ProviderControllerKind::InstanceTagging`] (`tagging.rs`): `--tags`
//!   on the instances of joining nodes, off the instances of deleted ones.
//! - [`ProviderControllerKind::NodeIpam`] (`nodeipam.rs`): pod CIDRs from
//!   the cloud's prefix, and in dual-stack mode an IPv4 range too.

use ccm_cloud_provider::{ProviderController, ProviderControllerKind};
use ccm_runtime::Context;

use crate::provider_shared::ProviderControllerSettings;
use crate::settings::ControllerSettings;
use crate::{Started, nodeipam, tagging};

/// Sets up the provider's controller `spec` and returns how it runs.
///
/// Call it, like [`crate::start`], before the context's informers start.
pub fn start_provider_controller(
    spec: &ProviderController,
    ctx: &Context,
    settings: &ControllerSettings,
    own: &ProviderControllerSettings,
) -> Started {
    match spec.kind {
        ProviderControllerKind::InstanceTagging => tagging::start(spec, ctx, own),
        ProviderControllerKind::NodeIpam => nodeipam::start(spec, ctx, settings, own),
        _ => Started::Off(format!(
            "this build has no controller of kind {:?}",
            spec.kind
        )),
    }
}
