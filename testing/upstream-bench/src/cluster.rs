//! The cluster's side of a run, played as kubelets and a user would, with
//! the administrator's client (whose requests the audit count leaves out):
//! nodes registered, the NLB Service created, and the milestones polled.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

/// The taint kubelet registers a node with under `--cloud-provider=external`.
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// `--cluster-cidr`: outside the seeded VPC's 10.0.0.0/16, room for
/// thousands of /24 pod CIDRs.
pub(crate) const CLUSTER_CIDR: &str = "100.64.0.0/10";
/// The benchmark's Service, in `default`.
pub(crate) const SERVICE: &str = "web";

/// Node `i`'s pod CIDR (from 0): `100.<64 + i/256>.<i%256>.0/24`.
pub(crate) fn pod_cidr(i: usize) -> String {
    format!("100.{}.{}.0/24", 64 + i / 256, i % 256)
}

/// Registers the node of instance `name` as kubelet does: the
/// uninitialized taint, a Hostname address, Ready, and pod CIDR `cidr`.
pub(crate) async fn register(nodes: &Api<Node>, name: &str, cidr: String) -> anyhow::Result<()> {
    let now = jiff::Timestamp::now().to_string();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}],
        },
    }))?;
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("registering node {name}"))?;
    let mut status = created;
    status.status = Some(serde_json::from_value(json!({
        "addresses": [{"type": "Hostname", "address": name}],
        "conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }],
    }))?);
    nodes
        .replace_status(name, &PostParams::default(), &status)
        .await
        .with_context(|| format!("writing node {name}'s status"))?;
    Ok(())
}

/// How many nodes no longer carry the uninitialized taint.
pub(crate) async fn initialized(nodes: &Api<Node>) -> anyhow::Result<usize> {
    let list = nodes.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|n| {
            !n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED))
        })
        .count())
}

/// Creates the benchmark's Service: an NLB for TCP port 80.
pub(crate) async fn create_service(services: &Api<Service>) -> anyhow::Result<()> {
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": SERVICE,
            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
        },
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": SERVICE},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }))?;
    services
        .create(&PostParams::default(), &service)
        .await
        .context("creating the Service")?;
    Ok(())
}

/// Whether the Service's status has an ingress.
pub(crate) async fn has_ingress(services: &Api<Service>) -> anyhow::Result<bool> {
    let service = services.get(SERVICE).await?;
    Ok(service
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .is_some_and(|i| !i.is_empty()))
}

/// How often milestones are polled.
pub(crate) const POLL: Duration = Duration::from_millis(100);
