//! `cargo xtask chart --push`: the chart packaged with `helm package` and
//! pushed to an OCI registry with `helm push`, after the chart's checks.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

use super::render;
use crate::cmd::run;
use crate::tools::helm;

/// The chart's `version:` from Chart.yaml.
pub(crate) fn chart_version() -> anyhow::Result<String> {
    let chart = std::fs::read_to_string(render::chart_dir().join("Chart.yaml"))
        .context("reading Chart.yaml")?;
    version_in(&chart)
}

fn version_in(chart: &str) -> anyhow::Result<String> {
    chart
        .lines()
        .find_map(|line| line.strip_prefix("version:"))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
        .context("Chart.yaml has no `version:`")
}

/// `target/charts/<name>-<version>.tgz`, where `helm package` writes.
pub(crate) fn package_path() -> anyhow::Result<PathBuf> {
    Ok(crate::cmd::target_dir()
        .join("charts")
        .join(format!("cloud-controller-manager-{}.tgz", chart_version()?)))
}

/// Packages the chart and pushes it to `registry` (`oci://host/path`);
/// `plain_http` for a registry without TLS (a loopback one).
pub(crate) fn push(registry: &str, plain_http: bool) -> anyhow::Result<PathBuf> {
    if !registry.starts_with("oci://") {
        bail!("--push {registry}: expected an OCI registry, oci://HOST/PATH");
    }
    let package = package_path()?;
    let dir = package.parent().context("a path under target")?;
    run(Command::new(helm::binary())
        .arg("package")
        .arg(render::chart_dir())
        .arg("--destination")
        .arg(dir))?;
    let mut push = Command::new(helm::binary());
    push.arg("push").arg(&package).arg(registry);
    if plain_http {
        push.arg("--plain-http");
    }
    run(&mut push)?;
    Ok(package)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_version_is_read_from_chart_yaml() {
        assert_eq!(
            version_in("apiVersion: v2\nname: x\nversion: 1.2.3\nappVersion: \"0.1.0\"\n").unwrap(),
            "1.2.3"
        );
        assert!(version_in("apiVersion: v2\n").is_err());
        assert!(chart_version().unwrap().contains('.'));
    }
}
