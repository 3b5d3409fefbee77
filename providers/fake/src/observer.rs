//! The fake's `ServiceObserver` (offered after
//! [`FakeCloud::observe_services`]): each call recorded with the Services
//! it saw, as `namespace/name`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, ServiceObserver};

use crate::load_balancer::describe;
use crate::{FakeCloud, Operation};

#[async_trait]
impl ServiceObserver for FakeCloud {
    fn resync_period(&self) -> Duration {
        self.inner.knobs.lock().resync
    }

    async fn sync_services(&self, services: &[Arc<Service>]) -> Result<(), CloudError> {
        let seen: Vec<String> = services
            .iter()
            .map(|s| {
                let m = &s.metadata;
                format!(
                    "{}/{}",
                    m.namespace.as_deref().unwrap_or_default(),
                    m.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        let detail = format!("{} Services", seen.len());
        self.enter(Operation::SyncServices, seen, Some(services.len()))
            .await?;
        describe(Operation::SyncServices, Some(&detail))
    }
}
