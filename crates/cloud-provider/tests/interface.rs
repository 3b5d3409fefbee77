//! The interface as a provider author meets it: optional capabilities and
//! the batch defaults.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, CloudProvider, InstanceMetadata, Instances};

/// A provider that only knows instances, counting single-node calls.
#[derive(Debug, Default)]
struct InstancesOnly {
    single_calls: AtomicUsize,
}

#[async_trait]
impl Instances for InstancesOnly {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.single_calls.fetch_add(1, Ordering::SeqCst);
        Ok(node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_some())
    }

    async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
        self.single_calls.fetch_add(1, Ordering::SeqCst);
        Ok(false)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.single_calls.fetch_add(1, Ordering::SeqCst);
        let name = node.metadata.name.clone().unwrap_or_default();
        if name == "missing" {
            return Err(CloudError::InstanceNotFound);
        }
        Ok(InstanceMetadata {
            provider_id: format!("test://{name}"),
            ..InstanceMetadata::default()
        })
    }
}

impl CloudProvider for InstancesOnly {
    fn provider_name(&self) -> &'static str {
        "instances-only"
    }

    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }
}

fn node(name: &str, provider_id: Option<&str>) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        status: None,
    })
}

#[test]
fn a_nodes_provider_id_is_its_spec_provider_id_when_not_empty() {
    assert_eq!(
        ccm_cloud_provider::provider_id(&node("a", Some("fake://a"))),
        Some("fake://a")
    );
    assert_eq!(ccm_cloud_provider::provider_id(&node("a", Some(""))), None);
    assert_eq!(ccm_cloud_provider::provider_id(&node("a", None)), None);
    assert_eq!(ccm_cloud_provider::provider_id(&Node::default()), None);
}

#[test]
fn provider_with_only_instances_reports_load_balancers_and_routes_absent() {
    let provider: Arc<dyn CloudProvider> = Arc::new(InstancesOnly::default());
    assert!(provider.instances().is_some());
    assert!(provider.load_balancer().is_none());
    assert!(provider.routes().is_none());
    assert!(
        provider.has_cluster_id(),
        "cluster ID support is the default"
    );
}

#[tokio::test]
async fn batch_default_makes_one_single_call_per_node_in_order() {
    let provider = InstancesOnly::default();
    let instances: &dyn Instances = &provider;
    assert_eq!(instances.max_batch_size().get(), 1);

    let nodes = vec![
        node("a", None),
        node("missing", None),
        node("c", Some("test://c")),
    ];
    let metadata = instances
        .instances_metadata(&nodes)
        .await
        .expect("the loop never fails as a whole");
    assert_eq!(provider.single_calls.load(Ordering::SeqCst), 3);
    assert_eq!(metadata.len(), 3);
    assert_eq!(metadata[0].as_ref().unwrap().provider_id, "test://a");
    assert!(matches!(metadata[1], Err(CloudError::InstanceNotFound)));
    assert_eq!(metadata[2].as_ref().unwrap().provider_id, "test://c");

    let exist = instances.instances_exist(&nodes).await.unwrap();
    assert_eq!(
        exist.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        [false, false, true]
    );
    let shutdown = instances.instances_shutdown(&nodes).await.unwrap();
    assert_eq!(shutdown.len(), 3);
    assert_eq!(provider.single_calls.load(Ordering::SeqCst), 9);
}

#[test]
fn errors_carry_the_delay_the_provider_asked_for() {
    let throttled = CloudError::Throttled {
        retry_after: std::time::Duration::from_secs(3),
    };
    assert_eq!(
        throttled.requested_delay(),
        Some(std::time::Duration::from_secs(3))
    );
    assert_eq!(throttled.kind(), "throttled");
    assert_eq!(CloudError::msg("boom").requested_delay(), None);
    let invalid = CloudError::invalid("service.beta.kubernetes.io/x", "expected a number");
    assert_eq!(
        invalid.to_string(),
        "invalid service.beta.kubernetes.io/x: expected a number"
    );
}
