//! Objects a server starts with: the namespaces and `kubernetes` Service of
//! every cluster, and optionally nodes fresh from kubelet registration and
//! LoadBalancer Services waiting for a cloud controller.

use serde_json::{Value, json};

use crate::error::Error;
use crate::registry::{self, WriteOptions};
use crate::resources::{Kind, by_kind};
use crate::store::Store;

/// Namespaces every cluster has.
pub(crate) const NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The taint kubelet adds under `--cloud-provider=external` until a cloud
/// controller initializes the node.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Creates `body` as a `kind` through the registry, as a client would.
pub(crate) fn create(
    store: &mut Store,
    kind: Kind,
    namespace: Option<&str>,
    body: Value,
) -> Result<(), Error> {
    let rt = by_kind(kind);
    let name = body["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let refused = |e: crate::status::ApiError| Error::Seed {
        object: format!("{}/{name}", rt.plural),
        message: e.message,
    };
    let decoded = registry::decode(rt, body, Default::default()).map_err(refused)?;
    registry::create(store, rt, namespace, decoded, WriteOptions::default())
        .map(drop)
        .map_err(refused)
}

/// The namespaces and the `default/kubernetes` Service.
pub(crate) fn cluster_basics(store: &mut Store) -> Result<(), Error> {
    for ns in NAMESPACES {
        create(
            store,
            Kind::Namespace,
            None,
            json!({"metadata": {"name": ns}}),
        )?;
    }
    create(
        store,
        Kind::Service,
        Some("default"),
        json!({
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]
            }
        }),
    )
}

/// The pod CIDR of node `i` (from 1): `10.244.<i>.0/24` for the first 255,
/// then on through the following /16s.
pub fn pod_cidr(i: usize) -> String {
    let second = (244 + i / 256) % 256;
    format!("10.{second}.{}.0/24", i % 256)
}

/// Node `node-<i>` (from 1) as kubelet registers it with
/// `--cloud-provider=external`: Ready, the uninitialized taint, a Hostname
/// address and pod CIDR [`pod_cidr`]`(i)`. What [`Builder::seed_nodes`]
/// seeds, for tests that create the same nodes on a real cluster.
///
/// [`Builder::seed_nodes`]: crate::Builder::seed_nodes
pub fn node(i: usize) -> Value {
    let name = format!("node-{i}");
    let now = crate::meta::now_time();
    let cidr = pod_cidr(i);
    json!({
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64"
            }
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "taints": [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}]
        },
        "status": {
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now
            }],
            "addresses": [{"type": "Hostname", "address": name}],
            "capacity": {"cpu": "2", "memory": "4026532Ki", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "3924132Ki", "pods": "110"},
            "nodeInfo": {
                "machineID": format!("{i:032x}"),
                "systemUUID": format!("{i:032x}"),
                "bootID": format!("{i:032x}"),
                "kernelVersion": "6.1.0-test",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.33.0",
                "kubeProxyVersion": "v1.33.0",
                "operatingSystem": "linux",
                "architecture": "amd64"
            }
        }
    })
}

/// Nodes `node-1` to `node-<count>`.
pub(crate) fn nodes(store: &mut Store, count: usize) -> Result<(), Error> {
    for i in 1..=count {
        create(store, Kind::Node, None, node(i))?;
    }
    Ok(())
}

/// Services `lb-1` to `lb-<count>` in `default`: type LoadBalancer, one TCP
/// port 80 with an allocated nodePort.
pub(crate) fn services(store: &mut Store, count: usize) -> Result<(), Error> {
    for i in 1..=count {
        let name = format!("lb-{i}");
        create(
            store,
            Kind::Service,
            Some("default"),
            json!({
                "metadata": {"name": name},
                "spec": {
                    "type": "LoadBalancer",
                    "selector": {"app": name},
                    "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
                }
            }),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidrs_are_unique_and_start_as_documented() {
        assert_eq!(pod_cidr(1), "10.244.1.0/24");
        assert_eq!(pod_cidr(255), "10.244.255.0/24");
        assert_eq!(pod_cidr(256), "10.245.0.0/24");
        let all: std::collections::BTreeSet<String> = (1..=10_000).map(pod_cidr).collect();
        assert_eq!(all.len(), 10_000);
    }

    #[test]
    fn seeded_nodes_decode_as_nodes() {
        let node: k8s_openapi::api::core::v1::Node =
            serde_json::from_value(node(7)).expect("a Node");
        let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        assert_eq!(taints[0].key, UNINITIALIZED_TAINT);
    }

    #[test]
    fn seeding_allocates_a_node_port_per_service() {
        let mut store = Store::new(100);
        cluster_basics(&mut store).expect("seeds");
        services(&mut store, 3).expect("seeds");
        let rt = by_kind(Kind::Service);
        let ports: std::collections::BTreeSet<u64> = store
            .objects(rt.storage, Some("default"))
            .filter_map(|(_, s)| {
                s.value
                    .pointer("/spec/ports/0/nodePort")
                    .and_then(Value::as_u64)
            })
            .collect();
        assert_eq!(ports.len(), 3);
    }
}
