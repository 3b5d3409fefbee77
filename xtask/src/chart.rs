//! `cargo xtask chart`: the Helm chart's checks, with real tools. helm lint
//! and template for every example values file, the rendered manifests
//! against Kubernetes' strict schemas, the values schema against bad
//! values, and the chart's RBAC against the requests a real CCM sends.

mod rbac;
pub(crate) mod render;
mod scenario;
mod validate;

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail, ensure};
use serde_json::Value;

use crate::tools;

/// The Helm chart: lint, strict schema validation, RBAC against a real CCM.
///
/// Checks charts/cloud-controller-manager, installing helm and kubernetes-validate
/// under target/tools/ when missing:
///   - helm lint --strict with each example values file under ci/;
///   - helm template of each, validated by kubernetes-validate --strict against
///     the lowest Kubernetes release the workspace supports;
///   - values the schema must refuse (no provider, no DigitalOcean token, ...);
///   - RBAC against reality: the fake-cloud-controller-manager, run with the
///     arguments the chart renders against the test API server, initializes
///     nodes, provisions, changes and deletes load balancers, programs routes and
///     deletes a node whose instance is gone; every request it sends must be
///     granted by the rendered ClusterRole/Role, and every granted permission
///     must have been used.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Everything but the RBAC scenario (no cargo build).
    #[arg(long = "static")]
    static_only: bool,
}

/// The example values whose render the RBAC scenario runs.
const SCENARIO_VALUES: &str = "fake-values.yaml";

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    tools::helm::ensure()?;
    tools::kubernetes_validate::ensure()?;
    let version = validate::lowest_kubernetes_version()?;
    validate::chart_kube_version(&version)?;
    let mut renders = Vec::new();
    for values in render::ci_values()? {
        render::lint(&values)?;
        let yaml = render::template(Some(&values), &[], &version)?.map_err(|message| {
            anyhow!("helm template -f {} failed:\n{message}", values.display())
        })?;
        validate::strict(&yaml, &version)?;
        println!(
            "{}: helm lint --strict, and kubernetes-validate --strict for Kubernetes {version}: ok",
            file_name(&values)
        );
        renders.push((values.clone(), render::documents(&yaml)?));
    }
    let refused = validate::refusals(&version)?;
    println!("values schema: refuses all {refused} kinds of bad values");
    if options.static_only {
        return Ok(());
    }
    rbac_against_reality(&renders)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The rules bound to the service account the workload of `docs` runs as.
fn rules_of(docs: &[Value]) -> anyhow::Result<Vec<rbac::Rule>> {
    let workload = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
        .context("the chart rendered no Deployment or DaemonSet")?;
    let account = workload["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .context("the workload names no service account")?;
    rbac::bound_rules(docs, render::NAMESPACE, account)
}

fn rbac_against_reality(renders: &[(PathBuf, Vec<Value>)]) -> anyhow::Result<()> {
    let (_, docs) = renders
        .iter()
        .find(|(path, _)| file_name(path) == SCENARIO_VALUES)
        .with_context(|| format!("no ci/{SCENARIO_VALUES} to run the RBAC scenario with"))?;
    let rules = rules_of(docs)?;
    // No provider has RBAC extras yet, so every example must bind exactly
    // the rules the scenario proves; one that needs more must prove it too.
    for (path, other) in renders {
        ensure!(
            rules_of(other)? == rules,
            "{} binds other RBAC rules than {SCENARIO_VALUES}, which the scenario checks",
            file_name(path)
        );
    }
    let deployment = render::find(docs, "Deployment")?;
    let args = scenario::local_args(&strings(
        &deployment["spec"]["template"]["spec"]["containers"][0]["args"],
    ));
    let secret = render::find(docs, "Secret")?;
    let cloud_config = secret["stringData"]
        .as_object()
        .and_then(|data| data.values().next())
        .and_then(Value::as_str)
        .context("the cloud-config Secret has no content")?;
    let traffic = scenario::run_scenario(&args, cloud_config)?;

    let undiscoverable: Vec<&String> = traffic
        .non_resource
        .iter()
        .filter(|p| !rbac::discovery_allowed(p))
        .collect();
    ensure!(
        undiscoverable.is_empty(),
        "the CCM requested non-resource paths no default role allows: {undiscoverable:?}"
    );
    let findings = rbac::compare(&rules, &traffic.resources);
    println!(
        "\nRBAC against reality: {} requests from the CCM; permissions used:",
        traffic.resources.len()
    );
    for permission in &findings.used {
        println!("  {permission}");
    }
    let mut problems = Vec::new();
    if !findings.refused.is_empty() {
        problems.push(format!(
            "requests the chart does not grant (the API server would refuse them):\n  {}",
            findings
                .refused
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
    }
    if !findings.unused.is_empty() {
        problems.push(format!(
            "permissions the chart grants that the CCM never used:\n  {}",
            findings
                .unused
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
    }
    if !problems.is_empty() {
        bail!(
            "the chart's RBAC does not match the CCM's requests\n{}",
            problems.join("\n")
        );
    }
    println!("every request granted, every permission used");
    Ok(())
}
