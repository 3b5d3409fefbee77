//! What an informer's cache keeps of each object: the fields a controller
//! reads. Everything else is dropped as the watch delivers the object,
//! before the cache or a subscriber sees it.
//!
//! On a real cluster most of a Node's bytes are fields no controller here
//! reads: `managedFields` (a field set per writer, kubelet's status updates
//! among them), the images the node holds (up to 50 names with sizes) and
//! its volumes. Caches only ever feed reads and patches computed from the
//! cached object (JSON patches `test` only labels, the provider ID and
//! taints), never a full update, so nothing dropped here is written back.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, Service};
use kube::api::ObjectMeta;

/// The annotation `kubectl apply` keeps a whole copy of the object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A kind an informer caches, and what of it the cache keeps.
pub trait Lean {
    /// Drops what no controller reads.
    fn lean(&mut self);
}

/// What no controller reads of any object's metadata: its field managers
/// and `kubectl apply`'s copy of the object.
fn lean_metadata(metadata: &mut ObjectMeta) {
    metadata.managed_fields = None;
    if let Some(annotations) = metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

impl Lean for Node {
    /// Keeps the metadata, the spec, and the status's addresses,
    /// conditions and phase; drops the images, volumes, capacity,
    /// allocatable, node info, daemon endpoints, config, runtime handlers
    /// and features kubelet reports.
    fn lean(&mut self) {
        lean_metadata(&mut self.metadata);
        if let Some(status) = self.status.as_mut() {
            status.images = None;
            status.volumes_attached = None;
            status.volumes_in_use = None;
            status.capacity = None;
            status.allocatable = None;
            status.node_info = None;
            status.daemon_endpoints = None;
            status.config = None;
            status.runtime_handlers = None;
            status.features = None;
        }
    }
}

impl Lean for Service {
    fn lean(&mut self) {
        lean_metadata(&mut self.metadata);
    }
}

impl Lean for PersistentVolume {
    fn lean(&mut self) {
        lean_metadata(&mut self.metadata);
    }
}

impl Lean for CertificateSigningRequest {
    fn lean(&mut self) {
        lean_metadata(&mut self.metadata);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A node as a real kube-apiserver serves it: field managers, kubectl's
    /// copy, images, volumes and kubelet's reports.
    fn full_node() -> Node {
        serde_json::from_value(json!({
            "metadata": {
                "name": "node-1",
                "labels": {"kubernetes.io/hostname": "node-1"},
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    LAST_APPLIED: "{\"kind\":\"Node\"}"
                },
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"providerID": "aws:///us-east-1a/i-1", "podCIDRs": ["10.244.1.0/24"],
                     "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "phase": "Running",
                "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320_368}],
                "volumesAttached": [{"name": "kubernetes.io/csi/ebs^vol-1", "devicePath": ""}],
                "volumesInUse": ["kubernetes.io/csi/ebs^vol-1"],
                "capacity": {"cpu": "2"},
                "allocatable": {"cpu": "2"},
                "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1",
                             "osImage": "Debian", "containerRuntimeVersion": "containerd://1.7",
                             "kubeletVersion": "v1.33.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                             "architecture": "amd64"},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "runtimeHandlers": [{"name": "runc"}],
                "features": {"supplementalGroupsPolicy": true}
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_node_keeps_what_the_controllers_read_and_nothing_else() {
        let mut node = full_node();
        node.lean();
        let lean = serde_json::to_value(&node).unwrap();
        assert_eq!(
            lean,
            json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "node-1",
                    "labels": {"kubernetes.io/hostname": "node-1"},
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0"}
                },
                "spec": {"providerID": "aws:///us-east-1a/i-1", "podCIDRs": ["10.244.1.0/24"],
                         "taints": [{"key": "k", "effect": "NoSchedule"}]},
                "status": {
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "phase": "Running"
                }
            })
        );
    }

    #[test]
    fn a_node_without_status_or_annotations_is_left_as_it_is() {
        let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        let before = node.clone();
        node.lean();
        assert_eq!(node, before);
    }

    #[test]
    fn a_service_keeps_its_spec_status_and_own_annotations() {
        let mut service: Service = serde_json::from_value(json!({
            "metadata": {
                "name": "web", "namespace": "default",
                "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb", LAST_APPLIED: "{}"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]
            },
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}}
        }))
        .unwrap();
        let mut expected = service.clone();
        expected.metadata.managed_fields = None;
        expected
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(LAST_APPLIED);
        service.lean();
        assert_eq!(service, expected);
        assert_eq!(service.metadata.annotations.as_ref().unwrap().len(), 1);
    }
}
