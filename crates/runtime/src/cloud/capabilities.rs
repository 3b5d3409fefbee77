//! Every capability of the wrapped provider through the
//! [`MeteredCloud`]: reads are counted and timed, writes are fenced by
//! leadership and planned in a dry run ([`mirror`]).
//!
//! Writes: a load balancer's ensure, update and delete; a route's create
//! and delete; the Service observer's sync; tagging; the audit's delete of
//! a leaked resource. Everything else is a read.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::annotations::AnnotationSchema;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use ccm_cloud_provider::{
    BatchResult, CloudError, EnsuredLoadBalancer, InstanceMetadata, InstanceTags, Instances,
    Inventory, LoadBalancer, LoadBalancerHealth, LoadBalancerStatus, OwnedResource, PodCidr,
    PodCidrs, Route, RouteCreate, Routes, ServiceObserver, TagOutcome, Volumes,
};
use futures::future::join_all;

use super::MeteredCloud;
use super::mirror::mirror;
use super::planned::{route_key, service_key};

mirror! {
    impl Instances from instances {
        read instance_exists(node: &Node) -> Result<bool, CloudError>;
        read instance_shutdown(node: &Node) -> Result<bool, CloudError>;
        read instance_metadata(node: &Node) -> Result<InstanceMetadata, CloudError>;
        read instances_exist(nodes: &[Arc<Node>]) -> BatchResult<bool>, batch nodes.len();
        read instances_shutdown(nodes: &[Arc<Node>]) -> BatchResult<bool>, batch nodes.len();
        read instances_metadata(nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata>,
            batch nodes.len();
    }
    also {
        fn max_batch_size(&self) -> NonZeroUsize {
            self.inner
                .instances()
                .map_or(NonZeroUsize::MIN, Instances::max_batch_size)
        }
    }
}

mirror! {
    impl LoadBalancer from load_balancer {
        read get_load_balancer(cluster_name: &str, service: &Service)
            -> Result<Option<LoadBalancerStatus>, CloudError>;
        read load_balancer_health(cluster_name: &str, service: &Service, nodes: &[Arc<Node>])
            -> Result<Option<LoadBalancerHealth>, CloudError>;
        write ensure_load_balancer(cluster_name: &str, service: &Service, nodes: &[Arc<Node>])
            -> Result<EnsuredLoadBalancer, CloudError>, key service_key(service);
        write update_load_balancer(cluster_name: &str, service: &Service, nodes: &[Arc<Node>])
            -> Result<(), CloudError>, key service_key(service);
        write ensure_load_balancer_deleted(cluster_name: &str, service: &Service)
            -> Result<(), CloudError>, key service_key(service);
    }
    also {
        fn load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
            match self.inner.load_balancer() {
                Some(lb) => lb.load_balancer_name(cluster_name, service),
                None => ccm_cloud_provider::default_load_balancer_name(service),
            }
        }

        fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
            self.inner.load_balancer()?.check_service(service)
        }

        fn annotation_schema(&self) -> Option<&'static AnnotationSchema> {
            self.inner.load_balancer()?.annotation_schema()
        }
    }
}

mirror! {
    impl Routes from routes {
        read list_routes(cluster_name: &str) -> Result<Vec<Route>, CloudError>;
        write create_route(cluster_name: &str, name_hint: &str, route: &Route)
            -> Result<(), CloudError>, key route_key(route);
        write delete_route(cluster_name: &str, route: &Route) -> Result<(), CloudError>,
            key route_key(route);
    }
    also {
        /// One fenced call of the routes class when the provider batches
        /// creates; otherwise (and in a dry run, which plans each route) a
        /// [`Routes::create_route`] call per route, all at once: each is
        /// counted, limited by the routes class and fenced on its own.
        async fn create_routes(
            &self,
            cluster_name: &str,
            routes: &[RouteCreate],
        ) -> BatchResult<()> {
            if !self.batches_route_creates() || self.dry_run.is_some() {
                let each = routes.iter().map(|create| {
                    self.create_route(cluster_name, &create.name_hint, &create.route)
                });
                return Ok(join_all(each).await);
            }
            let call = async {
                self.inner
                    .routes()
                    .ok_or(CloudError::NotImplemented)?
                    .create_routes(cluster_name, routes)
                    .await
            };
            let object = || format!("{} routes", routes.len());
            self.mutate("create_routes", Some(routes.len()), object, call)
                .await
        }

        fn batches_route_creates(&self) -> bool {
            self.inner
                .routes()
                .is_some_and(Routes::batches_route_creates)
        }
    }
}

mirror! {
    impl Volumes from volumes {
        read volumes_labels(ids: &[String]) -> BatchResult<Option<BTreeMap<String, String>>>,
            batch ids.len();
    }
    also {
        fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
            self.inner.volumes()?.volume_id(pv)
        }

        fn max_batch_size(&self) -> NonZeroUsize {
            self.inner
                .volumes()
                .map_or(NonZeroUsize::MIN, Volumes::max_batch_size)
        }
    }
}

mirror! {
    impl ServiceObserver from service_observer {
        write sync_services(services: &[Arc<Service>]) -> Result<(), CloudError>,
            key format!("{} Services", services.len());
    }
    also {
        fn resync_period(&self) -> Duration {
            self.inner
                .service_observer()
                .map_or(Duration::MAX, ServiceObserver::resync_period)
        }
    }
}

mirror! {
    impl Inventory from inventory {
        read owned_resources(cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError>;
        write delete_owned(cluster_name: &str, resource: &OwnedResource)
            -> Result<(), CloudError>, key format!("{} {}", resource.kind, resource.id);
    }
    also {}
}

mirror! {
    impl InstanceTags from instance_tags {
        write tag_instances(provider_ids: &[String], tags: &BTreeMap<String, String>)
            -> BatchResult<TagOutcome>, key provider_ids.join(","), batch provider_ids.len();
        write untag_instances(provider_ids: &[String], tags: &BTreeMap<String, String>)
            -> BatchResult<TagOutcome>, key provider_ids.join(","), batch provider_ids.len();
    }
    also {
        fn max_batch_size(&self) -> NonZeroUsize {
            self.inner
                .instance_tags()
                .map_or(NonZeroUsize::MIN, InstanceTags::max_batch_size)
        }

        fn tagged_label(&self) -> &'static str {
            self.inner
                .instance_tags()
                .map_or("", InstanceTags::tagged_label)
        }
    }
}

mirror! {
    impl PodCidrs from pod_cidrs {
        read pod_cidrs_of(provider_ids: &[String]) -> BatchResult<PodCidr>,
            batch provider_ids.len();
    }
    also {
        fn max_batch_size(&self) -> NonZeroUsize {
            self.inner
                .pod_cidrs()
                .map_or(NonZeroUsize::MIN, PodCidrs::max_batch_size)
        }
    }
}
