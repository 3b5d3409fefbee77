//! The chart's `serviceAccount.annotations` (cloud-provider-aws's chart
//! has them since 1.37, for IRSA) land on the ServiceAccount the CCM runs
//! as, exactly as each example's values give them: an IAM role annotated
//! anywhere else would never reach the CCM.

use std::path::PathBuf;

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};

use super::{file_name, render, strings};

/// Checks each example's render against its values; answers how many
/// examples set annotations (at least one must, or nothing is shown).
pub(crate) fn check(renders: &[(PathBuf, Vec<Value>)]) -> anyhow::Result<usize> {
    let mut annotated = 0;
    for (path, docs) in renders {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let values = render::documents(&text)?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        let account = &values["serviceAccount"];
        if account["create"] == false {
            continue;
        }
        let expected = match &account["annotations"] {
            Value::Null => json!({}),
            given => given.clone(),
        };
        let actual = workload_account_annotations(docs)
            .with_context(|| format!("the render of {}", file_name(path)))?;
        ensure!(
            actual == expected,
            "{}: the ServiceAccount the CCM runs as has annotations {actual}, not serviceAccount.annotations {expected}",
            file_name(path)
        );
        if expected != json!({}) {
            annotated += 1;
        }
    }
    ensure!(
        annotated > 0,
        "no example values set serviceAccount.annotations, so none is shown to land"
    );
    Ok(annotated)
}

/// The annotations (`{}` when none) of the ServiceAccount the CCM's
/// workload runs as; a `--dry-run` shadow's pods run as another account.
fn workload_account_annotations(docs: &[Value]) -> anyhow::Result<Value> {
    let mut workloads = docs.iter().filter(|d| {
        (d["kind"] == "Deployment" || d["kind"] == "DaemonSet")
            && !strings(&d["spec"]["template"]["spec"]["containers"][0]["args"])
                .iter()
                .any(|a| a.starts_with("--dry-run"))
    });
    let workload = match (workloads.next(), workloads.next()) {
        (Some(workload), None) => workload,
        (None, _) => bail!("the chart rendered no CCM Deployment or DaemonSet"),
        (Some(_), Some(_)) => bail!("the chart rendered more than one CCM workload"),
    };
    let name = workload["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .context("the workload names no service account")?;
    let account = docs
        .iter()
        .find(|d| {
            d["kind"] == "ServiceAccount"
                && d["metadata"]["name"] == name
                && d["metadata"]["namespace"] == render::NAMESPACE
        })
        .with_context(|| format!("the chart rendered no ServiceAccount {name}"))?;
    Ok(match &account["metadata"]["annotations"] {
        Value::Null => json!({}),
        annotations => annotations.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "arn:aws:iam::123456789012:role/ccm";

    /// A render with the CCM running as `ccm` and a shadow as
    /// `ccm-dry-run`, each account annotated as given.
    fn render(ccm: Value, shadow: Value) -> Vec<Value> {
        let workload = |account: &str, args: Value| {
            json!({"kind": "Deployment", "spec": {"template": {"spec": {
                "serviceAccountName": account,
                "containers": [{"args": args}],
            }}}})
        };
        let account = |name: &str, annotations: Value| {
            json!({"kind": "ServiceAccount", "metadata": {
                "name": name, "namespace": "kube-system", "annotations": annotations,
            }})
        };
        vec![
            workload("ccm-dry-run", json!(["--dry-run=true"])),
            account("ccm-dry-run", shadow),
            workload("ccm", json!(["--cloud-provider=aws"])),
            account("ccm", ccm),
        ]
    }

    #[test]
    fn the_annotations_are_read_from_the_account_the_ccm_runs_as() {
        let role = json!({"eks.amazonaws.com/role-arn": ROLE});
        let docs = render(role.clone(), Value::Null);
        assert_eq!(workload_account_annotations(&docs).unwrap(), role);
        let on_the_shadow = render(Value::Null, role);
        assert_eq!(
            workload_account_annotations(&on_the_shadow).unwrap(),
            json!({}),
            "the shadow's annotations are not the CCM's"
        );
    }

    #[test]
    fn a_workload_without_its_account_fails_the_check() {
        let mut docs = render(json!({}), json!({}));
        docs.retain(|d| d["metadata"]["name"] != "ccm");
        let err = workload_account_annotations(&docs).unwrap_err();
        assert!(err.to_string().contains("no ServiceAccount ccm"), "{err}");
    }
}
