//! Stored objects for the test API server's targets: the lists a strategic
//! merge patch merges by key (Node addresses and conditions, Service ports,
//! Pod containers and env) have items to merge with.

use serde_json::{Map, Value, json};

/// A Deployment's usual labels.
pub(crate) fn labels() -> Map<String, Value> {
    let labels = json!({
        "app": "web",
        "tier": "frontend",
        "version": "3",
        "app.kubernetes.io/name": "web",
    });
    labels.as_object().cloned().unwrap_or_default()
}

/// An object of `kind` as the server stores it; the kinds without a
/// fixture get metadata only.
pub(crate) fn of_kind(kind: &str) -> Value {
    let metadata = json!({
        "name": "node-1",
        "uid": "0b6a7c2e-5d1f-4e3a-9c8b-7a6f5e4d3c2b",
        "resourceVersion": "42",
        "labels": labels(),
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "owner", "uid": "u-1"}],
    });
    match kind {
        "Node" => json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": metadata,
            "spec": {
                "podCIDR": "10.244.1.0/24",
                "podCIDRs": ["10.244.1.0/24"],
                "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}],
            },
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": "10.0.1.5"},
                    {"type": "Hostname", "address": "node-1"},
                ],
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                    {"type": "NetworkUnavailable", "status": "False"},
                ],
            },
        }),
        "Service" => json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata,
            "spec": {
                "type": "LoadBalancer",
                "clusterIP": "10.96.0.10",
                "ports": [
                    {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 30080},
                    {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443, "nodePort": 30443},
                ],
                "selector": {"app": "web"},
            },
            "status": {
                "loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]},
                "conditions": [{"type": "LoadBalancerReady", "status": "True"}],
            },
        }),
        "Pod" => json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "containers": [{
                    "name": "web",
                    "image": "nginx:1.27",
                    "env": [{"name": "MODE", "value": "prod"}, {"name": "PORT", "value": "8080"}],
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "tolerations": [{"key": "example.com/spot", "operator": "Exists"}],
            },
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
        }),
        _ => json!({"apiVersion": "v1", "kind": kind, "metadata": metadata}),
    }
}
