//! Fixtures every suite builds: nodes as a kubelet with
//! `--cloud-provider=external` registers them, LoadBalancer Services, names
//! no other run uses, and readers for the fields the suites check.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus,
    PersistentVolume, PersistentVolumeSpec, Service, ServicePort, ServiceSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The taint a kubelet with `--cloud-provider=external` sets until the CCM
/// initializes the node.
pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// A 1 GiB `ReadWriteOnce` PersistentVolume `name` of CSI `driver`'s volume
/// `handle`, as a CSI provisioner creates it (no labels, no node affinity).
pub fn csi_persistent_volume(name: &str, driver: &str, handle: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([(
                "storage".to_owned(),
                Quantity("1Gi".into()),
            )])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..CSIPersistentVolumeSource::default()
            }),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

/// A `Ready` condition as kubelet posts it.
pub fn ready_condition(ready: bool) -> NodeCondition {
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("False", "KubeletNotReady")
    };
    NodeCondition {
        type_: "Ready".into(),
        status: status.into(),
        reason: Some(reason.into()),
        ..NodeCondition::default()
    }
}

/// A node as a kubelet with `--cloud-provider=external` registers it: the
/// hostname label, the uninitialized taint, a Hostname address, no provider
/// ID, not Ready yet.
pub fn uninitialized_node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_owned(),
                name.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(vec![Taint {
                key: UNINITIALIZED.into(),
                value: Some("true".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: name.into(),
            }]),
            conditions: Some(vec![ready_condition(false)]),
            ..NodeStatus::default()
        }),
    }
}

/// A Service `default/<name>` of type LoadBalancer: TCP port 80 to 8080,
/// selecting pods labelled `app: <name>`, with `annotations`.
pub fn load_balancer_service(name: &str, annotations: &[(&str, &str)]) -> Service {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(BTreeMap::from([("app".to_owned(), name.to_owned())])),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                target_port: Some(
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080),
                ),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `<prefix>-<n>`, unique across processes and within one: the process ID,
/// the time and a counter.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{:x}{nanos:08x}{n:x}", std::process::id())
}

/// Whether `node` carries the taint `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|t| t.key == key))
}

/// The IPs in a Service's `status.loadBalancer.ingress`.
pub fn ingress_ips(service: &Service) -> Vec<String> {
    ingress(service, |i| i.ip.clone())
}

/// The hostnames in a Service's `status.loadBalancer.ingress`.
pub fn ingress_hostnames(service: &Service) -> Vec<String> {
    ingress(service, |i| i.hostname.clone())
}

fn ingress(
    service: &Service,
    field: impl Fn(&k8s_openapi::api::core::v1::LoadBalancerIngress) -> Option<String>,
) -> Vec<String> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(field)
        .collect()
}

/// The finalizer the service controller keeps on a Service while it may
/// hold a load balancer.
pub const LOAD_BALANCER_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// `namespace/name`, as the clouds tag load balancers with it.
pub fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether `service` should have a load balancer: of type LoadBalancer and
/// not being deleted.
pub fn wants_load_balancer(service: &Service) -> bool {
    service.metadata.deletion_timestamp.is_none()
        && service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// Whether `service` carries [`LOAD_BALANCER_FINALIZER`].
pub fn has_load_balancer_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LOAD_BALANCER_FINALIZER))
}

/// The value of annotation `key` on `service`.
pub fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_node_is_tainted_and_a_unique_name_is_new_each_time() {
        let node = uninitialized_node("n1");
        assert!(has_taint(&node, UNINITIALIZED));
        assert!(!has_taint(&node, "other"));
        assert_ne!(unique("x"), unique("x"));
        let service = load_balancer_service("web", &[("a", "b")]);
        assert_eq!(annotation(&service, "a"), Some("b"));
        assert!(ingress_ips(&service).is_empty());
    }
}
