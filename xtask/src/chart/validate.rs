//! Rendered manifests against the Kubernetes API's strict schemas, and the
//! chart's own values schema against values it must refuse.

use std::process::Command;

use anyhow::{Context, bail};

use super::render;
use crate::cmd::repo_root;
use crate::tools::kubernetes_validate;

/// Kinds whose schemas are not Kubernetes' own (CRDs: the Prometheus
/// Operator's, and cert-manager's for the webhook's certificate);
/// kubernetes-validate warns that it has none and they pass unchecked.
const CUSTOM_KINDS: &[&str] = &["ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"];

/// The lowest Kubernetes release we support: the `v1_XX` feature of
/// k8s-openapi in the root Cargo.toml, as `1.XX.0`.
pub(crate) fn lowest_kubernetes_version() -> anyhow::Result<String> {
    let manifest =
        std::fs::read_to_string(repo_root().join("Cargo.toml")).context("reading Cargo.toml")?;
    let line = manifest
        .lines()
        .find(|l| l.starts_with("k8s-openapi"))
        .context("no k8s-openapi in the root Cargo.toml")?;
    let minor = line
        .split('"')
        .find_map(|word| word.strip_prefix("v1_"))
        .context("k8s-openapi has no v1_XX feature in the root Cargo.toml")?;
    Ok(format!("1.{minor}.0"))
}

/// Chart.yaml's `kubeVersion` must start at the lowest supported release.
pub(crate) fn chart_kube_version(lowest: &str) -> anyhow::Result<()> {
    let chart = std::fs::read_to_string(render::chart_dir().join("Chart.yaml"))
        .context("reading Chart.yaml")?;
    let expected = format!("kubeVersion: \">={lowest}-0\"");
    if !chart.lines().any(|l| l.trim() == expected) {
        bail!(
            "Chart.yaml must say {expected}: the workspace's lowest Kubernetes release is {lowest}"
        );
    }
    Ok(())
}

/// Chart.yaml's `appVersion` must be the workspace's version: the binary's
/// `--version` and the image tag (the chart's default) say the same.
pub(crate) fn chart_app_version() -> anyhow::Result<()> {
    let chart = std::fs::read_to_string(render::chart_dir().join("Chart.yaml"))
        .context("reading Chart.yaml")?;
    app_version_is(&chart, env!("CARGO_PKG_VERSION"))
}

fn app_version_is(chart: &str, version: &str) -> anyhow::Result<()> {
    let expected = format!("appVersion: \"{version}\"");
    if !chart.lines().any(|l| l.trim() == expected) {
        bail!(
            "Chart.yaml must say {expected}: the binaries and their images are version {version}"
        );
    }
    Ok(())
}

/// `kubernetes-validate --strict` of `yaml` against Kubernetes `version`.
/// Only the CRDs in [`CUSTOM_KINDS`] may go unchecked.
pub(crate) fn strict(yaml: &str, version: &str) -> anyhow::Result<()> {
    let binary = kubernetes_validate::binary();
    if !binary.exists() {
        bail!(
            "kubernetes-validate is not installed at {}: run `cargo xtask ci`, which installs it",
            binary.display()
        );
    }
    let out = crate::cmd::output_with_stdin(
        Command::new(&binary).args(["--strict", "--quiet", "--kubernetes-version", version, "-"]),
        yaml.as_bytes(),
    )?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let unexpected: Vec<&str> = report
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            !CUSTOM_KINDS
                .iter()
                .any(|kind| l.starts_with("WARN") && l.contains(&format!("kind {kind} ")))
        })
        .collect();
    if !out.status.success() || !unexpected.is_empty() {
        bail!(
            "kubernetes-validate --strict (Kubernetes {version}) refused the chart:\n{}",
            unexpected.join("\n")
        );
    }
    Ok(())
}

/// Values the schema (or a template's `required`) must refuse, with a word
/// the error must contain.
const REFUSED: &[(&str, &[&str], &str)] = &[
    ("no provider", &[], "provider"),
    ("an unknown provider", &["provider=gcp"], "provider"),
    (
        "DigitalOcean without its token Secret",
        &["provider=digitalocean"],
        "tokenSecret",
    ),
    (
        "routes without a cluster CIDR",
        &[
            "provider=fake",
            "networking.allocateNodeCIDRs=true",
            "networking.configureCloudRoutes=true",
        ],
        "clusterCIDR",
    ),
    (
        "an unknown kind of workload",
        &["provider=fake", "kind=StatefulSet"],
        "kind",
    ),
    (
        "a wildcard verb in extra RBAC rules",
        &["provider=fake", "rbac.extraRules[0].verbs[0]=*"],
        "verbs",
    ),
    (
        "a misspelt value",
        &["provider=fake", "replica=3"],
        "replica",
    ),
    (
        "a webhook failure policy the API server does not know",
        &["provider=fake", "webhook.failurePolicy=Deny"],
        "failurePolicy",
    ),
    (
        "a webhook timeout the API server refuses",
        &["provider=fake", "webhook.timeoutSeconds=60"],
        "timeoutSeconds",
    ),
    (
        "a webhook strictness that is not a boolean",
        &["provider=fake", "webhook.strict=perhaps"],
        "strict",
    ),
    (
        "a cert-manager issuer kind without its name",
        &[
            "provider=fake",
            "webhook.certManager.enabled=true",
            "webhook.certManager.issuerRef.kind=ClusterIssuer",
        ],
        "issuerRef",
    ),
    (
        "both an inline and an existing cloud config",
        &[
            "provider=fake",
            "cloudConfig.content=x",
            "cloudConfig.existingSecret=y",
        ],
        "content",
    ),
];

/// Every case of [`REFUSED`] fails to render, naming what is wrong.
pub(crate) fn refusals(version: &str) -> anyhow::Result<usize> {
    for (what, sets, word) in REFUSED {
        match render::template(None, sets, version)? {
            Ok(_) => bail!("the chart accepted {what} (--set {})", sets.join(" --set ")),
            Err(message) if message.contains(word) => {}
            Err(message) => {
                bail!("the chart refused {what}, but its error does not name `{word}`:\n{message}")
            }
        }
    }
    Ok(REFUSED.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_app_version_is_the_workspaces() {
        chart_app_version().unwrap();
        let err = app_version_is("version: 0.1.0\nappVersion: \"0.0.9\"\n", "0.1.0").unwrap_err();
        assert!(err.to_string().contains("appVersion: \"0.1.0\""), "{err}");
    }
}
