//! The benchmark's own Kubernetes API traffic: nodes registering as kubelets
//! do, their heartbeats, their removal, and LoadBalancer Services. Requests
//! go out with xtask's user agent, so the measurements can leave them out.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::{http, timestamp};

/// The taint kubelet registers a node with under `--cloud-provider=external`.
pub(crate) const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Parallel connections the driver uses: enough to register thousands of
/// nodes in a few seconds, few enough to leave the CCM its share of 2 cores.
const WORKERS: usize = 4;

/// The pod CIDR the test API server gives its seeded node `i` (from 1):
/// `10.244.<i>.0/24` for the first 255, then on through the following /16s.
pub(crate) fn pod_cidr(i: usize) -> String {
    let second = (244 + i / 256) % 256;
    format!("10.{second}.{}.0/24", i % 256)
}

/// Node `node-<i>` as kubelet registers it: the uninitialized taint, a
/// Hostname address, Ready, and a pod CIDR if asked for.
fn node(i: usize, with_pod_cidr: bool) -> Value {
    let name = format!("node-{i}");
    let now = timestamp::now();
    let mut spec = json!({
        "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]
    });
    if with_pod_cidr {
        let cidr = pod_cidr(i);
        spec["podCIDR"] = json!(cidr);
        spec["podCIDRs"] = json!([cidr]);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64"
            }
        },
        "spec": spec,
        "status": {
            "conditions": [ready_condition(&now, &now)],
            "addresses": [{"type": "Hostname", "address": name}],
            "capacity": {"cpu": "2", "memory": "4026532Ki", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "3924132Ki", "pods": "110"},
            "nodeInfo": {
                "machineID": format!("{i:032x}"),
                "systemUUID": format!("{i:032x}"),
                "bootID": format!("{i:032x}"),
                "kernelVersion": "6.1.0-bench",
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

fn ready_condition(heartbeat: &str, transition: &str) -> Value {
    json!({
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": transition
    })
}

/// Runs `each` for every item of `items` on [`WORKERS`] threads; fails with
/// the first error.
fn in_parallel<T: Sync>(
    items: &[T],
    each: impl Fn(&T) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<()> {
    let chunk = items.len().div_ceil(WORKERS).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().try_for_each(&each)))
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| bail!("a driver thread panicked"))
        })
    })
}

fn expect(response: &http::Response, ok: &[u16], what: &str) -> anyhow::Result<()> {
    if ok.contains(&response.status) {
        Ok(())
    } else {
        let body: String = response.body.chars().take(300).collect();
        bail!("{what}: HTTP {}: {body}", response.status)
    }
}

/// Registers nodes `node-<i>` for every `i` in `indices`, as kubelets do.
pub(crate) fn register_nodes(
    api: SocketAddr,
    indices: &[usize],
    with_pod_cidr: bool,
) -> anyhow::Result<()> {
    in_parallel(indices, |&i| {
        let body = node(i, with_pod_cidr).to_string();
        let response = http::request(
            api,
            "POST",
            "/api/v1/nodes",
            Some(("application/json", &body)),
        )?;
        expect(&response, &[201], &format!("creating node-{i}"))
    })
}

/// Deletes nodes `node-<i>` for every `i` in `indices`.
pub(crate) fn delete_nodes(api: SocketAddr, indices: &[usize]) -> anyhow::Result<()> {
    in_parallel(indices, |&i| {
        let path = format!("/api/v1/nodes/node-{i}");
        let response = http::request(api, "DELETE", &path, None)?;
        expect(&response, &[200, 202], &format!("deleting node-{i}"))
    })
}

/// One kubelet heartbeat for every node in `indices`: the Ready condition's
/// `lastHeartbeatTime`, patched into `nodes/status` as kubelet does.
pub(crate) fn heartbeat(api: SocketAddr, indices: &[usize]) -> anyhow::Result<()> {
    let now = timestamp::now();
    let body = json!({"status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": now}]}})
        .to_string();
    in_parallel(indices, |&i| {
        let path = format!("/api/v1/nodes/node-{i}/status");
        let response = http::request(
            api,
            "PATCH",
            &path,
            Some(("application/strategic-merge-patch+json", &body)),
        )?;
        expect(&response, &[200], &format!("heartbeat of node-{i}"))
    })
}

/// Creates Services `bench-lb-<i>` of type LoadBalancer in `default`.
pub(crate) fn create_services(api: SocketAddr, indices: &[usize]) -> anyhow::Result<()> {
    in_parallel(indices, |&i| {
        let name = format!("bench-lb-{i}");
        let body = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": name},
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
            }
        })
        .to_string();
        let response = http::request(
            api,
            "POST",
            "/api/v1/namespaces/default/services",
            Some(("application/json", &body)),
        )?;
        expect(&response, &[201], &format!("creating {name}"))
    })
}

fn list(api: SocketAddr, path: &str) -> anyhow::Result<Vec<Value>> {
    let response = http::get(api, path)?;
    expect(&response, &[200], &format!("GET {path}"))?;
    let mut list: Value =
        serde_json::from_str(&response.body).with_context(|| format!("GET {path}: not JSON"))?;
    Ok(list["items"]
        .as_array_mut()
        .map(std::mem::take)
        .unwrap_or_default())
}

/// What the nodes look like now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NodeCensus {
    pub(crate) nodes: usize,
    /// Without the uninitialized taint, with a provider ID.
    pub(crate) initialized: usize,
    /// With `NetworkUnavailable=False`.
    pub(crate) routed: usize,
}

pub(crate) fn node_census(api: SocketAddr) -> anyhow::Result<NodeCensus> {
    let nodes = list(api, "/api/v1/nodes")?;
    Ok(census_of(&nodes))
}

fn census_of(nodes: &[Value]) -> NodeCensus {
    let initialized = nodes
        .iter()
        .filter(|n| {
            let tainted = n["spec"]["taints"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == UNINITIALIZED));
            !tainted
                && n["spec"]["providerID"]
                    .as_str()
                    .is_some_and(|p| !p.is_empty())
        })
        .count();
    let routed = nodes
        .iter()
        .filter(|n| {
            n["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "NetworkUnavailable" && c["status"] == "False")
            })
        })
        .count();
    NodeCensus {
        nodes: nodes.len(),
        initialized,
        routed,
    }
}

/// LoadBalancer Services, and how many have an ingress.
pub(crate) fn services_with_ingress(api: SocketAddr) -> anyhow::Result<(usize, usize)> {
    let services = list(api, "/api/v1/services")?;
    let load_balancers: Vec<_> = services
        .iter()
        .filter(|s| s["spec"]["type"] == "LoadBalancer")
        .collect();
    let provisioned = load_balancers
        .iter()
        .filter(|s| {
            s["status"]["loadBalancer"]["ingress"]
                .as_array()
                .is_some_and(|i| !i.is_empty())
        })
        .count();
    Ok((load_balancers.len(), provisioned))
}

/// Polls `done` every `every` until it returns `Some` or fails, or
/// `timeout` passes (then `Ok(None)`).
pub(crate) fn poll<T>(
    timeout: Duration,
    every: Duration,
    mut done: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<Option<T>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = done()? {
            return Ok(Some(value));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidrs_match_the_test_api_servers_seeded_nodes() {
        assert_eq!(pod_cidr(1), "10.244.1.0/24");
        assert_eq!(pod_cidr(256), "10.245.0.0/24");
        assert_eq!(pod_cidr(5000), "10.7.136.0/24");
    }

    #[test]
    fn registered_nodes_carry_the_taint_and_a_cidr_only_when_asked() {
        let plain = node(3, false);
        assert_eq!(plain["spec"]["taints"][0]["key"], UNINITIALIZED);
        assert!(plain["spec"]["podCIDR"].is_null());
        assert_eq!(node(3, true)["spec"]["podCIDR"], "10.244.3.0/24");
    }

    #[test]
    fn the_census_counts_initialized_and_routed_nodes() {
        let nodes = [
            json!({"spec": {"providerID": "fake://a"}, "status": {"conditions": [
                {"type": "NetworkUnavailable", "status": "False"}]}}),
            json!({"spec": {"providerID": "fake://b", "taints": [{"key": UNINITIALIZED}]}}),
            json!({"spec": {}}),
        ];
        assert_eq!(
            census_of(&nodes),
            NodeCensus {
                nodes: 3,
                initialized: 1,
                routed: 1
            }
        );
    }

    #[test]
    fn polling_gives_up_at_its_deadline() {
        let mut calls = 0;
        let found: Option<()> = poll(Duration::from_millis(30), Duration::from_millis(10), || {
            calls += 1;
            Ok(None)
        })
        .unwrap();
        assert!(found.is_none());
        assert!((2..=5).contains(&calls), "{calls}");
    }
}
