//! The chart's alert rules as a Prometheus rule file, and promtool's checks
//! of them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, anyhow, bail};

use crate::chart::render;
use crate::cmd::repo_root;

/// `monitoring/`: the rule unit tests and the values the rules are
/// rendered with.
fn monitoring_dir() -> PathBuf {
    repo_root().join("monitoring")
}

/// Renders the chart's PrometheusRule with ci/fake-values.yaml, then
/// monitoring/rules-values.yaml, then `sets`, and writes its `spec` (the
/// rule groups) to `path` as JSON, which Prometheus reads as YAML.
pub(crate) fn render(path: &Path, sets: &[&str]) -> anyhow::Result<PathBuf> {
    let fake = render::chart_dir().join("ci").join("fake-values.yaml");
    let overlay = monitoring_dir().join("rules-values.yaml");
    let version = crate::chart::validate::lowest_kubernetes_version()?;
    let yaml = render::template_all(&[&fake, &overlay], sets, &version)?
        .map_err(|message| anyhow!("helm template of the alert rules failed:\n{message}"))?;
    let docs = render::documents(&yaml)?;
    let rule = render::find(&docs, "PrometheusRule")?;
    let groups = &rule["spec"]["groups"];
    if groups.as_array().is_none_or(Vec::is_empty) {
        bail!("the chart's PrometheusRule has no rule groups");
    }
    let file = serde_json::json!({ "groups": groups });
    std::fs::write(path, serde_json::to_vec_pretty(&file)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path.to_owned())
}

/// The names of the alerts in a rule file [`render`] wrote.
pub(crate) fn alert_names(path: &Path) -> anyhow::Result<Vec<String>> {
    let file: serde_json::Value = serde_json::from_slice(
        &std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    Ok(file["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .filter_map(|rule| rule["alert"].as_str().map(str::to_owned))
        .collect())
}

/// `promtool check rules`.
pub(crate) fn check(rules: &Path) -> anyhow::Result<()> {
    let out = promtool(
        Command::new("promtool")
            .arg("check")
            .arg("rules")
            .arg(rules),
    )?;
    let verdict = out
        .lines()
        .find(|l| l.contains("SUCCESS"))
        .with_context(|| format!("promtool check rules printed no verdict:\n{out}"))?;
    println!(
        "promtool check rules: {} alerts, {}",
        alert_names(rules)?.len(),
        verdict.trim()
    );
    Ok(())
}

/// `promtool test rules` of monitoring/rules.test.yaml, against the rules
/// rendered with the chart's defaults (`rules.json` in `dir`).
pub(crate) fn unit_tests(dir: &Path) -> anyhow::Result<()> {
    let tests = monitoring_dir().join("rules.test.yaml");
    let copy = dir.join("rules.test.yaml");
    std::fs::copy(&tests, &copy).with_context(|| format!("copying {}", tests.display()))?;
    let text = std::fs::read_to_string(&tests)?;
    let cases = text.lines().filter(|l| l.starts_with("- name:")).count();
    let fired: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("alertname:"))
        .map(str::trim)
        .collect();
    let alerts = alert_names(&dir.join("rules.json"))?;
    let untested: Vec<&String> = alerts
        .iter()
        .filter(|a| !fired.contains(a.as_str()))
        .collect();
    if !untested.is_empty() {
        bail!("{} has no test of {untested:?}", tests.display());
    }
    promtool(Command::new("promtool").arg("test").arg("rules").arg(&copy))?;
    println!(
        "promtool test rules: {cases} cases over all {} alerts passed",
        alerts.len()
    );
    Ok(())
}

/// Runs promtool; its output, or an error carrying it.
fn promtool(cmd: &mut Command) -> anyhow::Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("could not start {shown}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("{shown} failed:\n{text}");
    }
    Ok(text)
}
