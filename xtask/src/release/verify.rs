//! `cargo xtask release --loopback`, `cargo xtask ci`'s release check: the
//! whole release, as the workflow runs it, pushed to a registry on loopback
//! and read back with tools no one here wrote.

use std::process::Command;

use anyhow::{Context, ensure};
use serde_json::Value;

use super::{Options, Registry, image_reference, index_digest, sbom_digests};
use crate::cmd::{self, run, stdout as output};
use crate::tools;

/// Publishes the release to a loopback registry, then proves it is there:
/// `skopeo inspect --raw` of each image gives the image index built here
/// (its digest), listing every platform asked for, `oras discover` of each
/// platform's image finds that image's SBOM, as built here, as its
/// referrer,
/// `helm pull` of the chart renders the same manifests as the working
/// tree, and `sha256sum -c` accepts the release's SHA256SUMS.
pub(crate) fn against_loopback_registry(asked: &Options) -> anyhow::Result<()> {
    let registry = Registry::start(&cmd::target_dir().join("ci/registry"))?;
    let options = Options {
        registry: format!("{}/rust-ccm", registry.host()),
        plain_http: true,
        dry_run: false,
        loopback: false,
        providers: asked.providers.clone(),
        platform: asked.platform.clone(),
    };
    super::publish(&options)?;
    let oras = tools::go_install::ORAS.ensure()?;
    let platforms = crate::image::platform::distinct(&options.platform);
    for provider in options.providers() {
        let reference = image_reference(&options.registry, &provider);
        let layout = cmd::target_dir().join("images").join(&provider).join("oci");
        let raw = output(Command::new("skopeo").args([
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{reference}"),
        ]))?;
        let pushed = format!("sha256:{}", crate::digest::sha256_hex(raw.as_bytes()));
        let built = index_digest(&layout)?;
        ensure!(
            pushed == built,
            "{reference}: the registry serves {pushed}, built was the index {built}"
        );
        let index: Value = serde_json::from_str(&raw).context("skopeo inspect --raw: not JSON")?;
        let listed = platforms_listed(&index);
        let expected: Vec<String> = platforms.iter().map(|p| p.name()).collect();
        ensure!(
            listed == expected,
            "{reference}: the registry's index lists {listed:?}, expected {expected:?}"
        );
        println!(
            "registry: {reference} is the image index {pushed}, listing {}",
            listed.join(" and ")
        );
        let built_sboms = sbom_digests(&layout)?;
        ensure!(
            built_sboms.len() == platforms.len(),
            "{}: {} SBOMs for {} platforms",
            layout.display(),
            built_sboms.len(),
            platforms.len()
        );
        for (image, built_sbom) in built_sboms {
            let by_digest = format!(
                "{}@{image}",
                reference
                    .rsplit_once(':')
                    .map_or(&*reference, |(repo, _)| repo)
            );
            let referrers: Value = serde_json::from_str(&output(Command::new(&oras).args([
                "discover",
                "--plain-http",
                "--format",
                "json",
                &by_digest,
            ]))?)
            .context("oras discover: not JSON")?;
            let sbom = sbom_referrer(&referrers).with_context(|| {
                format!("oras discover {by_digest}: no CycloneDX referrer in {referrers}")
            })?;
            ensure!(
                sbom == built_sbom,
                "{by_digest}: the registry's SBOM referrer is {sbom}, built was {built_sbom}"
            );
            println!("registry: {by_digest} has its SBOM referrer {sbom}");
        }
    }
    chart_round_trip(&options.registry)?;
    run(Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(super::assets_dir()))?;
    println!(
        "registry: release round trip through {} passed",
        registry.host()
    );
    Ok(())
}

/// The platforms an image index lists, as `linux/arm64`.
fn platforms_listed(index: &Value) -> Vec<String> {
    index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or("?"),
                m["platform"]["architecture"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// The digest of the CycloneDX artifact among `oras discover`'s referrers
/// (its JSON lists them under `referrers`, older releases under `manifests`).
fn sbom_referrer(discovered: &Value) -> Option<String> {
    ["referrers", "manifests"]
        .iter()
        .filter_map(|key| discovered[key].as_array())
        .flatten()
        .find(|r| r["artifactType"] == crate::image::SBOM_MEDIA_TYPE)
        .and_then(|r| r["digest"].as_str())
        .map(str::to_owned)
}

/// `helm pull` of the pushed chart, then `helm template` of it and of the
/// working tree's chart with the same values: the same manifests. The
/// serving certificate comes from a named Secret ([`NAMED_CERT`]): the
/// chart's own metrics certificate is a new CA and key at every render.
/// The value that makes a render deterministic: the metrics port's
/// certificate from a Secret of the user's, not one `genCA` makes.
const NAMED_CERT: &str = "tls.secretName=release-check";

fn chart_round_trip(registry: &str) -> anyhow::Result<()> {
    let helm = tools::helm::binary();
    let pulled = cmd::target_dir().join("ci/registry/pulled");
    std::fs::create_dir_all(&pulled)?;
    let version = crate::chart::publish::chart_version()?;
    run(Command::new(&helm)
        .args([
            "pull",
            &format!("oci://{registry}/charts/cloud-controller-manager"),
        ])
        .args(["--version", &version, "--plain-http", "--destination"])
        .arg(&pulled))?;
    let package = pulled.join(format!("cloud-controller-manager-{version}.tgz"));
    let values = crate::chart::render::chart_dir().join("ci/fake-values.yaml");
    let template = |chart: &std::path::Path| {
        output(
            Command::new(&helm)
                .args(["template", "ccm"])
                .arg(chart)
                .args(["--namespace", crate::chart::render::NAMESPACE, "-f"])
                .arg(&values)
                .args(["--set", NAMED_CERT]),
        )
    };
    let from_registry = template(&package)?;
    let from_tree = template(&crate::chart::render::chart_dir())?;
    ensure!(
        from_registry == from_tree,
        "helm template of the chart pulled from {registry} differs from the working tree's"
    );
    println!(
        "registry: helm pull of the chart {version} renders the working tree's {} lines of manifests",
        from_tree.lines().count()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sbom_is_found_among_the_referrers_oras_lists() {
        let discovered = serde_json::json!({
            "referrers": [
                { "artifactType": "application/vnd.example.signature", "digest": "sha256:aa" },
                { "artifactType": "application/vnd.cyclonedx+json", "digest": "sha256:bb" }
            ]
        });
        assert_eq!(sbom_referrer(&discovered).as_deref(), Some("sha256:bb"));
        assert_eq!(sbom_referrer(&serde_json::json!({ "referrers": [] })), None);
    }

    #[test]
    fn the_platforms_of_an_index_are_read_in_its_order() {
        let index = serde_json::json!({ "manifests": [
            { "platform": { "os": "linux", "architecture": "amd64" } },
            { "platform": { "os": "linux", "architecture": "arm64", "variant": "v8" } }
        ]});
        assert_eq!(platforms_listed(&index), vec!["linux/amd64", "linux/arm64"]);
        assert!(platforms_listed(&serde_json::json!({})).is_empty());
    }
}
