//! The chart's NetworkPolicy (`networkPolicy`): none by default; when on,
//! it selects the workload's pods and lets in only the secure port and the
//! webhook's port, each from the peers the values give (or from anywhere
//! when they give none), and it passes kubernetes-validate's strict check.

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::{render, validate};

/// The values every render here starts from.
const BASE: [&str; 1] = ["provider=fake"];

/// Renders the chart without and with the NetworkPolicy and checks each;
/// answers how many renders were checked.
pub(crate) fn check(version: &str) -> anyhow::Result<usize> {
    let off = rendered(&[], version)?;
    ensure!(
        !off.iter().any(|d| d["kind"] == "NetworkPolicy"),
        "the default values rendered a NetworkPolicy"
    );
    let open = rendered(&["networkPolicy.enabled=true"], version)?;
    let rules = ingress(&open)?;
    ensure!(
        ports(&rules) == [10258, 10260] && rules.iter().all(|r| r.get("from").is_none()),
        "with no peers, both ports are open to any peer: {rules:?}"
    );
    let peers = [
        "networkPolicy.enabled=true",
        "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/24",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
    ];
    let closed = rendered(&peers, version)?;
    let rules = ingress(&closed)?;
    ensure!(ports(&rules) == [10258, 10260], "ports: {rules:?}");
    ensure!(
        rules[0]["from"] == json!([{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}])
            && rules[1]["from"] == json!([{"ipBlock": {"cidr": "10.0.0.0/24"}}]),
        "each port lets in only its peers: {rules:?}"
    );
    let no_webhook = rendered(
        &["networkPolicy.enabled=true", "webhook.enabled=false"],
        version,
    )?;
    ensure!(
        ports(&ingress(&no_webhook)?) == [10258],
        "without the webhook, its port stays closed"
    );
    Ok(4)
}

/// The chart rendered with `sets` (after [`BASE`]), strictly validated.
fn rendered(sets: &[&str], version: &str) -> anyhow::Result<Vec<Value>> {
    let sets: Vec<&str> = BASE.iter().chain(sets).copied().collect();
    let yaml = render::template(None, &sets, version)?
        .map_err(|message| anyhow::anyhow!("helm template {sets:?} failed:\n{message}"))?;
    validate::strict(&yaml, version).with_context(|| format!("with {sets:?}"))?;
    render::documents(&yaml)
}

/// The NetworkPolicy's ingress rules, once it is checked to select the
/// workload's pods and to restrict ingress alone.
fn ingress(docs: &[Value]) -> anyhow::Result<Vec<Value>> {
    let policy = render::find(docs, "NetworkPolicy")?;
    let workload = render::find(docs, "Deployment")?;
    let pods = &workload["spec"]["template"]["metadata"]["labels"];
    let selector = policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .context("the NetworkPolicy selects no pods by label")?;
    for (key, value) in selector {
        if pods[key] != *value {
            bail!("the NetworkPolicy selects {key}={value}, which the CCM's pods do not carry");
        }
    }
    ensure!(
        policy["spec"]["policyTypes"] == json!(["Ingress"]),
        "egress is left open (the CCM calls the API server and the cloud)"
    );
    Ok(policy["spec"]["ingress"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// The one TCP port of each rule, in order.
fn ports(rules: &[Value]) -> Vec<u64> {
    rules
        .iter()
        .filter_map(|rule| rule["ports"][0]["port"].as_u64())
        .collect()
}
