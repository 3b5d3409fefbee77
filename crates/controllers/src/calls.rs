//! The provider's batch instance calls, as the runtime's batching takes them.

use std::sync::Arc;

use ccm_cloud_provider::{InstanceMetadata, Instances};
use ccm_runtime::{BatchCall, Context};
use futures::FutureExt;

/// `instances_metadata`.
pub(crate) fn metadata(ctx: &Context) -> BatchCall<InstanceMetadata> {
    let cloud = ctx.cloud.clone();
    Arc::new(move |nodes| {
        let cloud = cloud.clone();
        async move { cloud.instances_metadata(&nodes).await }.boxed()
    })
}

/// `instances_exist`.
pub(crate) fn exist(ctx: &Context) -> BatchCall<bool> {
    let cloud = ctx.cloud.clone();
    Arc::new(move |nodes| {
        let cloud = cloud.clone();
        async move { cloud.instances_exist(&nodes).await }.boxed()
    })
}

/// `instances_shutdown`.
pub(crate) fn shutdown(ctx: &Context) -> BatchCall<bool> {
    let cloud = ctx.cloud.clone();
    Arc::new(move |nodes| {
        let cloud = cloud.clone();
        async move { cloud.instances_shutdown(&nodes).await }.boxed()
    })
}
