//! The audit's calls (`<binary> audit`): listing what the provider made
//! is a read; deleting one leaked resource is a mutation, fenced and
//! planned like any other.

use async_trait::async_trait;
use ccm_cloud_provider::{CloudError, Inventory, OwnedResource};

use super::MeteredCloud;

impl MeteredCloud {
    fn inventory_inner(&self) -> Result<&dyn Inventory, CloudError> {
        self.inner.inventory().ok_or(CloudError::NotImplemented)
    }
}

#[async_trait]
impl Inventory for MeteredCloud {
    async fn owned_resources(&self, cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError> {
        self.observe("owned_resources", None, async {
            self.inventory_inner()?.owned_resources(cluster_name).await
        })
        .await
    }

    async fn delete_owned(
        &self,
        cluster_name: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError> {
        let object = || format!("{} {}", resource.kind, resource.id);
        self.mutate("delete_owned", object, async {
            self.inventory_inner()?
                .delete_owned(cluster_name, resource)
                .await
        })
        .await
    }
}
