//! `cargo xtask chart`: the Helm chart's checks, with real tools. helm lint
//! and template for every example values file, the rendered manifests
//! against Kubernetes' strict schemas, the values schema against bad
//! values, the ServiceAccount's annotations, the ServiceMonitor's
//! certificate checks, the NetworkPolicy's ports and peers, and the chart's
//! RBAC proven by a real CCM running under it.

mod networkpolicy;
pub(crate) mod publish;
mod rbac;
pub(crate) mod render;
mod scenario;
mod serviceaccount;
mod servicemonitor;
pub(crate) mod validate;
mod webhook;

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail, ensure};
use serde_json::Value;

use crate::tools;

/// The Helm chart: lint, strict schema validation, RBAC proven by a real CCM.
///
/// Checks charts/cloud-controller-manager, installing helm and kubernetes-validate
/// under target/tools/ when missing:
///   - helm lint --strict with each example values file under ci/;
///   - helm template of each, validated by kubernetes-validate --strict against
///     the lowest Kubernetes release the workspace supports;
///   - values the schema must refuse (no provider, no DigitalOcean token, ...);
///   - each example's serviceAccount.annotations (IRSA's role) are exactly those
///     of the ServiceAccount the CCM runs as;
///   - the ServiceMonitor verifies the CCM's certificate against the CA of the
///     Secret it is served from (the chart's own, cert-manager's, the user's),
///     and skips verification only when serviceMonitor.insecureSkipVerify asks;
///   - RBAC by running under it: the fake-cloud-controller-manager, run with the
///     arguments the chart renders as the chart's ServiceAccount (a static token)
///     against the test API server in RBAC mode holding the chart's rendered
///     ServiceAccount, roles and bindings, initializes nodes, provisions, changes
///     and deletes load balancers, programs routes and deletes a node whose
///     instance is gone; any request the API server refuses (403) fails the
///     check, and so does any permission the chart grants that the CCM never
///     used (least privilege). With the admission webhook's self-managed
///     certificates, the CCM also fills the chart's empty Secret and the
///     configuration's caBundle under it. Every provider's example values must
///     bind the same rules; the AWS and DigitalOcean end-to-end suites run
///     their CCMs under their renders.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Everything but the RBAC scenario (no cargo build).
    #[arg(long = "static")]
    static_only: bool,
    /// After the checks, `helm package` the chart into target/charts/ and
    /// `helm push` it to REGISTRY (oci://HOST/PATH).
    #[arg(long, value_name = "REGISTRY")]
    push: Option<String>,
    /// With --push: the registry speaks plain HTTP (a loopback one).
    #[arg(long, requires = "push")]
    plain_http: bool,
}

/// The example values whose render the RBAC scenario runs.
const SCENARIO_VALUES: &str = "fake-values.yaml";

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    tools::helm::ensure()?;
    tools::kubernetes_validate::ensure()?;
    let version = validate::lowest_kubernetes_version()?;
    validate::chart_kube_version(&version)?;
    validate::chart_app_version()?;
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
    let annotated = serviceaccount::check(&renders)?;
    println!(
        "ServiceAccount: carries serviceAccount.annotations in every example, {annotated} of them annotated"
    );
    let refused = validate::refusals(&version)?;
    println!("values schema: refuses all {refused} kinds of bad values");
    let monitors = servicemonitor::check(&version)?;
    println!(
        "ServiceMonitor: verifies the CCM's certificate against its CA in {monitors} renders but the one asking not to"
    );
    let policies = networkpolicy::check(&version)?;
    println!(
        "NetworkPolicy: none by default; in {policies} renders, only the secure and webhook ports, from their peers"
    );
    if !options.static_only {
        rbac_against_reality(&renders)?;
    }
    if let Some(registry) = &options.push {
        let package = publish::push(registry, options.plain_http)?;
        println!("chart: {} pushed to {registry}", package.display());
    }
    Ok(())
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

/// The CCM's arguments, as the workload runs it.
fn workload_args(docs: &[Value]) -> anyhow::Result<Vec<String>> {
    let workload = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
        .context("the chart rendered no Deployment or DaemonSet")?;
    Ok(strings(
        &workload["spec"]["template"]["spec"]["containers"][0]["args"],
    ))
}

/// The workload's `--controllers=` argument.
fn controllers_arg(docs: &[Value]) -> anyhow::Result<String> {
    workload_args(docs)?
        .into_iter()
        .find(|a| a.starts_with("--controllers="))
        .context("the workload has no --controllers argument")
}

/// The rules of `docs` in three: the kubelet-serving-csr-approver's
/// (`certificates.k8s.io`), the webhook certificates' (Secrets and
/// `admissionregistration.k8s.io`), and the rest.
fn split_rules(docs: &[Value]) -> anyhow::Result<[Vec<rbac::Rule>; 3]> {
    let mut split = [Vec::new(), Vec::new(), Vec::new()];
    for rule in rules_of(docs)? {
        let group = |g: &str| rule.api_groups.iter().any(|group| group == g);
        let part = if group("certificates.k8s.io") {
            0
        } else if group("admissionregistration.k8s.io")
            || rule.resources.iter().any(|r| r == "secrets")
        {
            1
        } else {
            2
        };
        split[part].push(rule);
    }
    Ok(split)
}

/// `actual` and `expected` hold the same rules, in any order.
fn same_rules(actual: &[rbac::Rule], expected: &[rbac::Rule]) -> bool {
    actual.len() == expected.len() && expected.iter().all(|rule| actual.contains(rule))
}

/// What the kubelet-serving-csr-approver needs, and no more.
fn csr_approver_rules() -> Vec<rbac::Rule> {
    let rule = |resource: &str, names: &[&str], verbs: &[&str]| rbac::Rule {
        api_groups: vec!["certificates.k8s.io".to_owned()],
        resources: vec![resource.to_owned()],
        resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        namespace: None,
        bootstrap: false,
    };
    vec![
        rule("certificatesigningrequests", &[], &["get", "list", "watch"]),
        rule("certificatesigningrequests/approval", &[], &["update"]),
        rule("signers", &["kubernetes.io/kubelet-serving"], &["approve"]),
    ]
}

fn rbac_against_reality(renders: &[(PathBuf, Vec<Value>)]) -> anyhow::Result<()> {
    let (_, docs) = renders
        .iter()
        .find(|(path, _)| file_name(path) == SCENARIO_VALUES)
        .with_context(|| format!("no ci/{SCENARIO_VALUES} to run the RBAC scenario with"))?;
    let rules = rules_of(docs)?;
    let [_, _, common] = split_rules(docs)?;
    // No provider has RBAC extras, so every example must bind exactly the
    // rules the scenario proves; one that turns on the (default-off)
    // kubelet-serving-csr-approver binds exactly its rules on top, which
    // the fake binary's csr_approver suite proves under that render. The
    // webhook's self-managed certificates add exactly theirs (proven by
    // the scenario, whose render has them), and nothing without them:
    // cert-manager's certificates, or no webhook.
    for (path, other) in renders {
        let [approver, certificates, rest] = split_rules(other)?;
        ensure!(
            rest == common,
            "{} binds other RBAC rules than {SCENARIO_VALUES}, which the scenario checks",
            file_name(path)
        );
        let args = workload_args(other)?;
        let expected = webhook::SelfManaged::from_args(&args)?
            .map(|names| names.rules())
            .unwrap_or_default();
        ensure!(
            same_rules(&certificates, &expected),
            "{} runs the admission webhook {} self-managed certificates and binds these Secret and admissionregistration.k8s.io rules, which do not fit: {certificates:?}",
            file_name(path),
            if expected.is_empty() {
                "without"
            } else {
                "with"
            }
        );
        let on = controllers_arg(other)?.contains("kubelet-serving-csr-approver");
        let expected = if on { csr_approver_rules() } else { Vec::new() };
        ensure!(
            approver == expected,
            "{} runs {} the kubelet-serving-csr-approver and binds these certificates.k8s.io rules, which do not fit: {approver:?}",
            file_name(path),
            if on { "with" } else { "without" }
        );
    }
    let deployment = render::find(docs, "Deployment")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let args = strings(&pod["containers"][0]["args"]);
    let account = pod["serviceAccountName"]
        .as_str()
        .context("the workload names no service account")?;
    let rbac = scenario::ChartRbac::from_render(docs, render::NAMESPACE, account);
    // The cloud config's Secret is the one with content: the webhook's is
    // rendered empty, the metrics port's certificate is kubernetes.io/tls.
    let cloud_config = docs
        .iter()
        .filter(|d| d["kind"] == "Secret" && d["type"] != "kubernetes.io/tls")
        .find_map(|secret| {
            secret["stringData"]
                .as_object()
                .and_then(|data| data.values().next())
                .and_then(Value::as_str)
        })
        .context("the chart rendered no cloud-config Secret with content")?;
    let certificates = webhook::Certificates::from_render(docs, &args)?;
    let traffic = scenario::run_scenario(&args, cloud_config, &rbac, certificates.as_ref())?;

    let findings = rbac::compare(&rules, &traffic.resources);
    println!(
        "\nRBAC by running under it: {} requests from the CCM granted; permissions used:",
        traffic.resources.len()
    );
    for permission in &findings.used {
        println!("  {permission}");
    }
    let mut problems = Vec::new();
    if !traffic.refused.is_empty() {
        problems.push(format!(
            "the API server refused the CCM under the chart's RBAC (403):\n  {}",
            scenario::first_lines(&traffic.refused)
        ));
    }
    if !traffic.anonymous.is_empty() {
        problems.push(format!(
            "the CCM sent requests without its token, which prove nothing:\n  {}",
            scenario::first_lines(&traffic.anonymous)
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
            "the chart's RBAC does not fit the CCM\n{}",
            problems.join("\n")
        );
    }
    println!("no request refused, every permission used");
    Ok(())
}
