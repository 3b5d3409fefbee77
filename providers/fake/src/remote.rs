//! [`RemoteCloud`]: the fake cloud's provider when the cloud runs as its own
//! process ([`crate::server`]): every interface call goes to the server over
//! loopback HTTP, named with this process's leader-election identity.

pub(crate) mod wire;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use ccm_cloud_provider::fence::{FencedBody, Request};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec, PersistentVolume, Service};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{
    BatchResult, CloudError, CloudProvider, EnsuredLoadBalancer, InitContext, InstanceMetadata,
    Instances, Inventory, LoadBalancer, LoadBalancerHealth, LoadBalancerStatus, OwnedResource,
    Route, Routes, Volumes,
};
use serde::de::DeserializeOwned;

use crate::load_balancer::{panic_if_asked, validate};
use crate::{Operation, PROVIDER_NAME, volumes};
use wire::{
    Answer, Args, CALLER_HEADER, DRY_RUN_HEADER, Limits, PLANNED, Plain, WireEnsured,
    WireMaybeHealth, WireMaybeStatus, WireMetadata, WireOwned, WireOwnedList, WireRoute,
    WireRoutes,
};

/// How long one call may take: beyond the server's longest injected
/// latency plus a crash trap's hold, a call is given up as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(400);

/// The fake cloud served by another process.
#[derive(Debug)]
pub struct RemoteCloud {
    url: String,
    http: reqwest::Client,
    caller: OnceLock<String>,
    limits: OnceLock<Limits>,
}

impl RemoteCloud {
    /// A client of the server at `url` (such as `http://127.0.0.1:8080`).
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(url: impl Into<String>) -> Result<Self, CloudError> {
        // The server speaks plain HTTP on loopback: no trust store. Left to
        // its default, reqwest parses the platform's every root certificate
        // (144 on Debian) at build and keeps them for the client's life.
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .no_proxy()
            .tls_certs_only(std::iter::empty())
            .build()
            .map_err(|e| CloudError::other("building the fake cloud's HTTP client", e))?;
        Ok(Self {
            url: url.into().trim_end_matches('/').to_owned(),
            http,
            caller: OnceLock::new(),
            limits: OnceLock::new(),
        })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CloudError> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .map_err(|e| CloudError::other(format!("the fake cloud at {}", self.url), e))?;
        decode(response).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        op: Operation,
        args: Args,
    ) -> Result<Answer<T>, CloudError> {
        let caller = self.caller.get().map_or("unknown", String::as_str);
        // In a dry run the server plans a mutation instead of making it, so
        // the plan can say whether it is already in place.
        let dry_run = op.is_mutation() && ccm_cloud_provider::fence::dry_run();
        // The framework's request fence, as a real provider asks it: before
        // the send, and again when the connection writes the body.
        if !dry_run {
            ccm_cloud_provider::fence::check_request(Request {
                operation: op.as_str(),
                mutates: op.is_mutation(),
                detail: "",
            })?;
        }
        let body = serde_json::to_vec(&args)
            .map_err(|e| CloudError::other(format!("encoding {op}'s arguments"), e))?;
        let mut request = self
            .http
            .post(format!("{}/v1/{op}", self.url))
            .header(CALLER_HEADER, caller)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if dry_run {
            request = request.header(DRY_RUN_HEADER, "true");
        }
        let response = request
            .body(reqwest::Body::wrap(FencedBody::new(body)))
            .send()
            .await
            .map_err(|e| {
                // A body the fence refused: say so, as a fenced error.
                match ccm_cloud_provider::fence::check() {
                    Err(fenced) => fenced,
                    Ok(()) => CloudError::other(format!("the fake cloud at {}: {op}", self.url), e),
                }
            })?;
        let answer: Answer<T> = decode(response).await?;
        match answer {
            // What the server would have changed: each change described to
            // this process's fence, which plans and refuses it.
            Err(planned) if dry_run && planned.kind == PLANNED => {
                for detail in planned.message.lines() {
                    ccm_cloud_provider::fence::check_request(Request {
                        operation: op.as_str(),
                        mutates: true,
                        detail,
                    })?;
                }
                Err(CloudError::msg(format!("{op}: planned, not sent")))
            }
            answer => Ok(answer),
        }
    }

    /// One call answered by one value.
    async fn single<W: DeserializeOwned>(
        &self,
        op: Operation,
        args: Args,
    ) -> Result<W, CloudError> {
        self.call::<W>(op, args).await?.map_err(CloudError::from)
    }

    /// One call answered by a value per item.
    async fn batch<W: DeserializeOwned, T>(
        &self,
        op: Operation,
        args: Args,
        convert: fn(W) -> T,
    ) -> BatchResult<T> {
        let items = self.single::<Vec<Answer<W>>>(op, args).await?;
        Ok(items
            .into_iter()
            .map(|item| item.map(convert).map_err(CloudError::from))
            .collect())
    }

    fn limits(&self) -> Limits {
        self.limits.get().copied().unwrap_or(Limits {
            batch_size: 1,
            volume_batch_size: 1,
        })
    }
}

async fn decode<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, CloudError> {
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(CloudError::msg(format!(
            "the fake cloud answered {status}: {body}"
        )));
    }
    response
        .json()
        .await
        .map_err(|e| CloudError::other("the fake cloud's answer", e))
}

fn plain<T>(p: Plain<T>) -> T {
    p.0
}

/// What the fake cloud reads of a node: its name and provider ID. Nothing
/// else crosses the wire, so a load-balancer call over 10,000 nodes stays a
/// few hundred KiB, not megabytes of Node objects.
fn slim(node: &Node) -> Node {
    Node {
        metadata: ObjectMeta {
            name: node.metadata.name.clone(),
            ..ObjectMeta::default()
        },
        spec: node.spec.as_ref().map(|spec| NodeSpec {
            provider_id: spec.provider_id.clone(),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

fn nodes_only(nodes: &[Arc<Node>]) -> Args {
    Args {
        nodes: nodes.iter().map(|n| slim(n)).collect(),
        ..Args::default()
    }
}

fn one_node(node: &Node) -> Args {
    Args {
        nodes: vec![slim(node)],
        ..Args::default()
    }
}

fn for_service(cluster: &str, service: &Service, nodes: &[Arc<Node>]) -> Args {
    Args {
        cluster: Some(cluster.to_owned()),
        service: Some(service.clone()),
        nodes: nodes.iter().map(|n| slim(n)).collect(),
        ..Args::default()
    }
}

#[async_trait]
impl CloudProvider for RemoteCloud {
    fn provider_name(&self) -> &'static str {
        PROVIDER_NAME
    }

    async fn initialize(&self, ctx: &InitContext) -> Result<(), CloudError> {
        let _ = self
            .caller
            .set(ctx.identity.clone().unwrap_or_else(|| "unknown".to_owned()));
        let limits: Limits = self.get("/limits").await?;
        let _ = self.limits.set(limits);
        Ok(())
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

    fn volumes(&self) -> Option<&dyn Volumes> {
        Some(self)
    }

    fn inventory(&self) -> Option<&dyn Inventory> {
        Some(self)
    }

    /// Mutations are planned by the server in a dry run.
    fn describes_requests(&self) -> bool {
        true
    }
}

#[async_trait]
impl Instances for RemoteCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.single(Operation::InstanceExists, one_node(node))
            .await
            .map(plain)
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.single(Operation::InstanceShutdown, one_node(node))
            .await
            .map(plain)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.single::<WireMetadata>(Operation::InstanceMetadata, one_node(node))
            .await
            .map(Into::into)
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(self.limits().batch_size).unwrap_or(NonZeroUsize::MIN)
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.batch(Operation::InstancesExist, nodes_only(nodes), plain)
            .await
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.batch(Operation::InstancesShutdown, nodes_only(nodes), plain)
            .await
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        self.batch(
            Operation::InstancesMetadata,
            nodes_only(nodes),
            WireMetadata::into,
        )
        .await
    }
}

#[async_trait]
impl LoadBalancer for RemoteCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let status: WireMaybeStatus = self
            .single(
                Operation::GetLoadBalancer,
                for_service(cluster_name, service, &[]),
            )
            .await?;
        Ok(status.0.map(Into::into))
    }

    async fn load_balancer_health(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Option<LoadBalancerHealth>, CloudError> {
        let health: WireMaybeHealth = self
            .single(
                Operation::LoadBalancerHealth,
                for_service(cluster_name, service, nodes),
            )
            .await?;
        Ok(health.into())
    }

    /// As the in-process fake cloud: the annotations decide.
    fn check_service(&self, service: &Service) -> Option<Result<(), CloudError>> {
        Some(validate(service))
    }

    fn annotation_schema(
        &self,
    ) -> Option<&'static ccm_cloud_provider::annotations::AnnotationSchema> {
        Some(&crate::load_balancer::SCHEMA)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<EnsuredLoadBalancer, CloudError> {
        panic_if_asked(service);
        self.single::<WireEnsured>(
            Operation::EnsureLoadBalancer,
            for_service(cluster_name, service, nodes),
        )
        .await
        .map(Into::into)
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        panic_if_asked(service);
        self.single(
            Operation::UpdateLoadBalancer,
            for_service(cluster_name, service, nodes),
        )
        .await
        .map(plain)
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(), CloudError> {
        self.single(
            Operation::EnsureLoadBalancerDeleted,
            for_service(cluster_name, service, &[]),
        )
        .await
        .map(plain)
    }
}

#[async_trait]
impl Routes for RemoteCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let args = Args {
            cluster: Some(cluster_name.to_owned()),
            ..Args::default()
        };
        let routes: WireRoutes = self.single(Operation::ListRoutes, args).await?;
        routes.0.into_iter().map(Route::try_from).collect()
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let args = Args {
            cluster: Some(cluster_name.to_owned()),
            route: Some(WireRoute::from(route)),
            name_hint: Some(name_hint.to_owned()),
            ..Args::default()
        };
        self.single(Operation::CreateRoute, args).await.map(plain)
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        let args = Args {
            cluster: Some(cluster_name.to_owned()),
            route: Some(WireRoute::from(route)),
            ..Args::default()
        };
        self.single(Operation::DeleteRoute, args).await.map(plain)
    }
}

#[async_trait]
impl Volumes for RemoteCloud {
    fn volume_id(&self, pv: &PersistentVolume) -> Option<String> {
        volumes::volume_id(pv)
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(self.limits().volume_batch_size).unwrap_or(NonZeroUsize::MIN)
    }

    async fn volumes_labels(
        &self,
        ids: &[String],
    ) -> BatchResult<Option<BTreeMap<String, String>>> {
        let args = Args {
            ids: ids.to_vec(),
            ..Args::default()
        };
        self.batch(Operation::VolumesLabels, args, plain).await
    }
}

#[async_trait]
impl Inventory for RemoteCloud {
    async fn owned_resources(&self, cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError> {
        let args = Args {
            cluster: Some(cluster_name.to_owned()),
            ..Args::default()
        };
        let list: WireOwnedList = self.single(Operation::OwnedResources, args).await?;
        list.0.into_iter().map(OwnedResource::try_from).collect()
    }

    async fn delete_owned(
        &self,
        cluster_name: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError> {
        let args = Args {
            cluster: Some(cluster_name.to_owned()),
            resource: Some(WireOwned::from(resource)),
            ..Args::default()
        };
        self.single(Operation::DeleteOwned, args).await.map(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_nodes_name_and_provider_id_cross_the_wire() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "annotations": {"a": "b"}},
            "spec": {"providerID": "fake://n1", "podCIDR": "10.0.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}], "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let args = nodes_only(&[Arc::new(node)]);
        assert_eq!(
            serde_json::to_value(&args.nodes).unwrap(),
            json!([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"providerID": "fake://n1"}}])
        );
        let bare = Node {
            metadata: ObjectMeta {
                name: Some("n2".into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        assert_eq!(
            serde_json::to_value(one_node(&bare).nodes).unwrap(),
            json!([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}])
        );
    }
}
