//! The provider conformance suite against the fake cloud, and against
//! three purpose-made broken versions of it, which the suite must catch.

use crate::support;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::{
    BatchResult, CloudError, CloudProvider, EnsuredLoadBalancer, InstanceMetadata, Instances,
    LoadBalancer, LoadBalancerStatus, NodeAddress, NodeAddressType, Route, Routes,
};
use ccm_provider_conformance::{Emulator, Outcome, Report, Resources, Subject};
use ccm_provider_fake::{ANNOTATION_TYPE, FakeCloud, InjectedError, Instance, InstanceState};

/// The fake cloud, as the suite drives it.
#[derive(Debug, Clone)]
struct FakeEmulator {
    cloud: FakeCloud,
}

#[async_trait]
impl Emulator for FakeEmulator {
    async fn add_instance(&self, name: &str) -> Node {
        let provider_id = format!("fake://{name}");
        self.cloud.add_instance(Instance {
            name: name.to_owned(),
            provider_id: provider_id.clone(),
            instance_type: "fake.small".into(),
            zone: "fake-region-1a".into(),
            region: "fake-region-1".into(),
            addresses: vec![NodeAddress::new(NodeAddressType::InternalIp, "10.0.0.1")],
            state: InstanceState::Running,
            labels: Default::default(),
        });
        Arc::unwrap_or_clone(support::node_with_provider_id(name, &provider_id))
    }

    fn missing_node(&self, name: &str) -> Node {
        Arc::unwrap_or_clone(support::node_with_provider_id(
            name,
            &format!("fake://{name}"),
        ))
    }

    async fn stop_instance(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        assert!(self.cloud.set_instance_state(name, InstanceState::Stopped));
    }

    async fn remove_instance(&self, node: &Node) {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.cloud.remove_instance(name);
    }

    fn service(&self, name: &str, uid: &str) -> Service {
        support::service(name, uid, &[])
    }

    fn foreign_service(&self, name: &str, uid: &str) -> Option<Service> {
        Some(support::service(
            name,
            uid,
            &[(ANNOTATION_TYPE, "external")],
        ))
    }

    async fn resources(&self) -> Resources {
        Resources::from([
            (
                "load-balancers".to_owned(),
                self.cloud.load_balancers().len(),
            ),
            ("routes".to_owned(), self.cloud.routes().len()),
        ])
    }

    fn requests(&self) -> u64 {
        self.cloud.calls().len() as u64
    }

    async fn set_throttled(&self, on: bool) {
        if on {
            let throttled = InjectedError::Throttled {
                retry_after: Duration::from_secs(1),
            };
            self.cloud.fail_next(None, throttled, u32::MAX);
        } else {
            self.cloud.clear_injected();
        }
    }
}

fn subject(provider: Arc<dyn CloudProvider>, cloud: &FakeCloud) -> Subject {
    Subject {
        neighbour: provider.clone(),
        provider,
        cluster: "conformance".into(),
        neighbour_cluster: "neighbour".into(),
        emulator: Arc::new(FakeEmulator {
            cloud: cloud.clone(),
        }),
    }
}

#[tokio::test]
async fn the_fake_cloud_conforms() {
    let cloud = FakeCloud::default();
    cloud.set_batch_size(NonZeroUsize::new(100).expect("not zero"));
    ccm_provider_conformance::assert_conforms(&subject(Arc::new(cloud.clone()), &cloud)).await;
}

/// What a [`Broken`] fake does wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every ensure makes a new load balancer.
    EnsureNotIdempotent,
    /// Batch answers come back reversed.
    BatchOutOfOrder,
    /// A missing instance is an error instead of `Ok(false)`.
    NotFoundAsError,
}

/// The fake cloud with one [`Fault`].
#[derive(Debug)]
struct Broken {
    cloud: FakeCloud,
    fault: Fault,
    ensures: AtomicU64,
}

async fn report(fault: Fault) -> Report {
    let cloud = FakeCloud::default();
    cloud.set_batch_size(NonZeroUsize::new(100).expect("not zero"));
    let broken = Arc::new(Broken {
        cloud: cloud.clone(),
        fault,
        ensures: AtomicU64::new(0),
    });
    ccm_provider_conformance::run(&subject(broken, &cloud)).await
}

fn failed(report: &Report, check: &str) -> bool {
    matches!(report.outcome(check), Some(Outcome::Failed(_)))
}

#[tokio::test]
async fn a_non_idempotent_ensure_fails() {
    let report = report(Fault::EnsureNotIdempotent).await;
    assert!(
        failed(
            &report,
            "load balancers: ensure twice gives one status and creates nothing the second time"
        ),
        "{report}"
    );
    assert!(report.passed() > 0, "{report}");
}

#[tokio::test]
async fn a_batch_answered_out_of_order_fails() {
    let report = report(Fault::BatchOutOfOrder).await;
    assert!(
        failed(
            &report,
            "instances: a batch answers in order and length, with per-node errors"
        ),
        "{report}"
    );
}

#[tokio::test]
async fn not_found_returned_as_an_error_fails() {
    let report = report(Fault::NotFoundAsError).await;
    assert!(
        failed(
            &report,
            "instances: a missing instance is not found, never an error"
        ),
        "{report}"
    );
}

#[async_trait]
impl CloudProvider for Broken {
    fn provider_name(&self) -> &'static str {
        "broken"
    }
    fn instances(&self) -> Option<&dyn Instances> {
        Some(self)
    }
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }
    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
}

impl Broken {
    fn reorder<T>(&self, answers: BatchResult<T>) -> BatchResult<T> {
        let mut answers = answers?;
        if self.fault == Fault::BatchOutOfOrder {
            answers.reverse();
        }
        Ok(answers)
    }
}

#[async_trait]
impl Instances for Broken {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        match self.cloud.instance_exists(node).await {
            Ok(false) if self.fault == Fault::NotFoundAsError => {
                Err(CloudError::msg("instance not found"))
            }
            answer => answer,
        }
    }
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.cloud.instance_shutdown(node).await
    }
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.cloud.instance_metadata(node).await
    }
    fn max_batch_size(&self) -> NonZeroUsize {
        Instances::max_batch_size(&self.cloud)
    }
    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.reorder(self.cloud.instances_exist(nodes).await)
    }
    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.reorder(self.cloud.instances_shutdown(nodes).await)
    }
    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        self.reorder(self.cloud.instances_metadata(nodes).await)
    }
}

#[async_trait]
impl LoadBalancer for Broken {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.cloud.get_load_balancer(cluster_name, service).await
    }
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        if self.fault != Fault::EnsureNotIdempotent {
            return self
                .cloud
                .ensure_load_balancer(cluster_name, service, nodes)
                .await;
        }
        // A new name every time: the cloud gains a load balancer per call.
        let mut renamed = service.clone();
        let n = self.ensures.fetch_add(1, Ordering::Relaxed);
        renamed.metadata.uid = Some(format!("broken-{n}"));
        self.cloud
            .ensure_load_balancer(cluster_name, &renamed, nodes)
            .await
    }
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        self.cloud
            .update_load_balancer(cluster_name, service, nodes)
            .await
    }
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        self.cloud
            .ensure_load_balancer_deleted(cluster_name, service)
            .await
    }
}

#[async_trait]
impl Routes for Broken {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.cloud.list_routes(cluster_name).await
    }
    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        self.cloud
            .create_route(cluster_name, name_hint, route)
            .await
    }
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.cloud.delete_route(cluster_name, route).await
    }
}
