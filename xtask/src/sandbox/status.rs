//! What the sandbox shows: read from the API server and the CCM's metrics.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::{Context, bail};
use serde_json::Value;

use super::conditions::{self, Observed};
use super::volumes;
use crate::http;

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

#[derive(Debug, Default, PartialEq)]
pub(crate) struct Status {
    nodes: usize,
    initialized: usize,
    routed: usize,
    load_balancers: usize,
    provisioned: usize,
    /// The fake cloud's PersistentVolumes, and how many have zone and region.
    volumes: usize,
    labelled: usize,
    /// Controller alias → whether it runs.
    controllers: BTreeMap<String, bool>,
    /// The LoadBalancer Services' conditions, from the same list.
    conditions: Observed,
}

fn items(api: SocketAddr, path: &str, token: Option<&str>) -> anyhow::Result<Vec<Value>> {
    let response = http::request_as(api, "GET", path, None, token)?;
    if response.status != 200 {
        bail!("GET {path}: HTTP {}", response.status);
    }
    let list: Value =
        serde_json::from_str(&response.body).with_context(|| format!("GET {path}: not JSON"))?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// `ccm_controller_running{controller="x"} v` lines of the metrics text.
fn controllers(metrics: &str) -> BTreeMap<String, bool> {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("ccm_controller_running{controller=\""))
        .filter_map(|rest| {
            let (name, value) = rest.split_once("\"}")?;
            Some((name.to_owned(), value.trim() == "1"))
        })
        .collect()
}

impl Status {
    /// Reads the API and `/metrics` without credentials.
    pub(crate) fn read(api: SocketAddr, metrics: SocketAddr) -> anyhow::Result<Self> {
        Self::read_as(api, metrics, None, None)
    }

    /// Reads the API with `api_token` and `/metrics` with `metrics_token`
    /// (each a bearer token, when given).
    pub(crate) fn read_as(
        api: SocketAddr,
        metrics: SocketAddr,
        api_token: Option<&str>,
        metrics_token: Option<&str>,
    ) -> anyhow::Result<Self> {
        let nodes = items(api, "/api/v1/nodes", api_token)?;
        let services = items(api, "/api/v1/services", api_token)?;
        let (volumes, labelled) =
            volumes::labelled(&items(api, "/api/v1/persistentvolumes", api_token)?);
        let response =
            http::get_https_as(metrics, "/metrics", metrics_token).context("the CCM's /metrics")?;
        if response.status != 200 {
            bail!(
                "the CCM's /metrics: HTTP {}: {}",
                response.status,
                response.body
            );
        }
        let metrics = response.body;
        let initialized = nodes
            .iter()
            .filter(|n| {
                let tainted = n["spec"]["taints"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["key"] == UNINITIALIZED));
                !tainted && n["spec"]["providerID"].is_string()
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
        Ok(Self {
            nodes: nodes.len(),
            initialized,
            routed,
            load_balancers: load_balancers.len(),
            provisioned,
            volumes,
            labelled,
            controllers: controllers(&metrics),
            conditions: conditions::observe(&services),
        })
    }

    /// Each LoadBalancer Service's conditions of [`conditions::TYPES`].
    pub(crate) fn conditions(&self) -> &Observed {
        &self.conditions
    }

    fn part(&self, controller: &str, what: &str, done: usize, total: usize) -> String {
        match self.controllers.get(controller) {
            Some(true) => format!("{what} {done}/{total}"),
            Some(false) => format!("{what}: not available (the {controller} controller is off)"),
            None => format!("{what}: waiting for the CCM to lead"),
        }
    }

    pub(crate) fn line(&self) -> String {
        [
            self.part(
                "cloud-node",
                "nodes initialized",
                self.initialized,
                self.nodes,
            ),
            self.part(
                "service",
                "load balancers provisioned",
                self.provisioned,
                self.load_balancers,
            ),
            self.part("route", "nodes with routes", self.routed, self.nodes),
            self.part(
                "persistentvolume-label",
                "volumes labelled",
                self.labelled,
                self.volumes,
            ),
        ]
        .join(" · ")
    }

    /// Everything is done — and every controller that does it is running.
    pub(crate) fn complete(&self) -> bool {
        let running = |c: &str| self.controllers.get(c) == Some(&true);
        running("cloud-node")
            && running("service")
            && running("route")
            && running("persistentvolume-label")
            && self.labelled == self.volumes
            && self.initialized == self.nodes
            && self.provisioned == self.load_balancers
            && self.routed == self.nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_which_controllers_run_from_metrics() {
        let text = "# HELP x\nccm_controller_running{controller=\"service\"} 1\nccm_controller_running{controller=\"route\"} 0\n";
        let map = controllers(text);
        assert_eq!(map.get("service"), Some(&true));
        assert_eq!(map.get("route"), Some(&false));
    }

    #[test]
    fn an_unavailable_controller_is_shown_and_never_counts_as_done() {
        let status = Status {
            nodes: 5,
            initialized: 5,
            routed: 0,
            load_balancers: 2,
            provisioned: 0,
            volumes: 2,
            labelled: 1,
            controllers: [
                ("cloud-node".to_owned(), true),
                ("service".to_owned(), false),
                ("route".to_owned(), false),
            ]
            .into(),
            conditions: Observed::new(),
        };
        assert!(
            status
                .line()
                .contains("load balancers provisioned: not available")
        );
        assert!(status.line().starts_with("nodes initialized 5/5"));
        assert!(!status.complete());
    }
}
