//! What `--check` proves about a built image, with tools no one here wrote:
//! skopeo reads the archive both as an oci-archive and as a docker-archive,
//! and umoci unpacks the layout as a runtime would, so the binary can be run
//! from the unpacked root filesystem; and the SBOM read back from the binary
//! names what `cargo metadata` resolves for it.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail, ensure};
use serde_json::Value;

use super::metadata::Metadata;
use super::platform::Platform;
use crate::cmd::stdout as output;
use crate::timestamp::rfc3339;

/// `skopeo inspect` of `archive` under both transports: the labels, platform
/// and layer must be what was built.
pub(crate) fn skopeo(
    archive: &Path,
    meta: &Metadata,
    platform: Platform,
    manifest_digest: &str,
    diff_id: &str,
) -> anyhow::Result<()> {
    for transport in ["oci-archive", "docker-archive"] {
        let reference = format!("{transport}:{}", archive.display());
        let out = output(Command::new("skopeo").args(["inspect", &reference]))?;
        let inspected: Value = serde_json::from_str(&out)
            .with_context(|| format!("skopeo inspect {reference}: not JSON"))?;
        for (key, value) in meta.labels() {
            ensure!(
                inspected["Labels"][key] == value.as_str(),
                "skopeo inspect {reference}: label {key} is {}, expected {value}",
                inspected["Labels"][key]
            );
        }
        ensure!(
            inspected["Os"] == "linux" && inspected["Architecture"] == platform.architecture(),
            "skopeo inspect {reference}: platform {}/{}, expected {}",
            inspected["Os"],
            inspected["Architecture"],
            platform.name()
        );
        let layers = inspected["Layers"].as_array().map(Vec::len);
        ensure!(
            layers == Some(1),
            "skopeo inspect {reference}: {layers:?} layers, expected one"
        );
        println!(
            "skopeo inspect {transport} ({}): labels, platform and layer as built",
            platform.name()
        );
    }
    // The OCI transport keeps the manifest as written, so its digest is the
    // image's; docker-archive describes the uncompressed layer instead.
    let oci: Value = serde_json::from_str(&output(
        Command::new("skopeo").args(["inspect", &format!("oci-archive:{}", archive.display())]),
    )?)?;
    ensure!(
        oci["Digest"] == manifest_digest,
        "oci-archive digest {} is not the manifest's {manifest_digest}",
        oci["Digest"]
    );
    let docker: Value = serde_json::from_str(&output(
        Command::new("skopeo").args(["inspect", &format!("docker-archive:{}", archive.display())]),
    )?)?;
    ensure!(
        docker["Layers"][0] == diff_id,
        "docker-archive layer {} is not the diff_id {diff_id}",
        docker["Layers"][0]
    );
    Ok(())
}

/// `umoci unpack` of `platform`'s image in the layout into `bundle`, then
/// the unpacked binary's `--version` (under qemu for a platform this
/// machine does not run); the runtime config umoci derives must run it as
/// user 65532.
pub(crate) fn umoci(
    layout: &Path,
    bundle: &Path,
    meta: &Metadata,
    platform: Platform,
) -> anyhow::Result<()> {
    if bundle.exists() {
        std::fs::remove_dir_all(bundle)
            .with_context(|| format!("removing {}", bundle.display()))?;
    }
    output(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!(
                "{}:{}",
                layout.display(),
                super::index::platform_tag(meta, platform)
            ))
            .arg(bundle),
    )?;
    let runtime: Value = serde_json::from_slice(
        &std::fs::read(bundle.join("config.json")).context("umoci wrote no config.json")?,
    )?;
    let uid = &runtime["process"]["user"]["uid"];
    ensure!(
        *uid == 65532,
        "the unpacked image runs as uid {uid}, expected 65532"
    );
    let entrypoint = format!("/bin/{}", meta.binary_name);
    ensure!(
        runtime["process"]["args"][0] == entrypoint.as_str(),
        "the unpacked image runs {}, expected {entrypoint}",
        runtime["process"]["args"]
    );
    let binary = bundle.join("rootfs").join("bin").join(&meta.binary_name);
    let version = output(runner(&binary, platform).arg("--version"))?;
    // The compiler's version follows; its exact text is rustc's.
    let expected = format!(
        "{} {} (provider {}; commit {}; built {}; rustc ",
        meta.binary_name,
        meta.version,
        meta.provider,
        meta.revision,
        rfc3339(meta.created)
    );
    ensure!(
        version.trim().starts_with(&expected) && version.trim().ends_with(')'),
        "{} --version printed `{}`, expected `{expected}…)`",
        binary.display(),
        version.trim()
    );
    println!(
        "umoci unpack ({}): runs as 65532; {} --version{}: {}",
        platform.name(),
        meta.binary_name,
        if platform.is_host() {
            String::new()
        } else {
            format!(" under {}", crate::tools::zig::QEMU)
        },
        version.trim()
    );
    Ok(())
}

/// A command that runs `binary`, built for `platform`: itself, or under
/// qemu's user-mode emulator.
pub(crate) fn runner(binary: &Path, platform: Platform) -> Command {
    if platform.is_host() {
        Command::new(binary)
    } else {
        let mut qemu = Command::new(crate::tools::zig::QEMU);
        qemu.arg(binary);
        qemu
    }
}

/// The SBOM lists every crate the binary's package, and each workspace
/// crate it depends on, depend on directly (normal dependencies, as
/// `cargo metadata` resolves them for the platform's target), each at the resolved
/// version; for the AWS binary, `aws-sdk-ec2` among them. Returns a line
/// saying so.
pub(crate) fn sbom(sbom: &[u8], package: &str, platform: Platform) -> anyhow::Result<String> {
    let listed = super::sbom::crates(sbom)?;
    let metadata: Value = serde_json::from_str(&output(crate::cmd::cargo().args([
        "metadata",
        "--format-version=1",
        "--locked",
        "--filter-platform",
        platform.target(),
    ]))?)
    .context("cargo metadata: not JSON")?;
    let expected = direct_dependencies(&metadata, package)?;
    ensure!(
        !expected.is_empty(),
        "cargo metadata resolves no dependencies for {package}"
    );
    let missing: Vec<String> = expected
        .iter()
        .filter(|wanted| !listed.contains(wanted))
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    ensure!(
        missing.is_empty(),
        "the SBOM of {package} does not list {}",
        missing.join(", ")
    );
    let sdk: Vec<String> = listed
        .iter()
        .filter(|(name, _)| name.starts_with("aws-sdk-"))
        .map(|(name, version)| format!("{name} {version}"))
        .collect();
    Ok(format!(
        "SBOM ({}): {} crates, the {} direct dependencies of {package} and its workspace crates at their resolved versions{}",
        platform.name(),
        listed.len(),
        expected.len(),
        if sdk.is_empty() {
            String::new()
        } else {
            format!(" ({})", sdk.join(", "))
        }
    ))
}

/// `(name, version)` of the normal dependencies of `package` and of each
/// workspace crate it depends on, from `cargo metadata`'s resolve graph.
fn direct_dependencies(metadata: &Value, package: &str) -> anyhow::Result<Vec<(String, String)>> {
    let packages = metadata["packages"].as_array().context("no packages")?;
    let by_id = |id: &Value| packages.iter().find(|p| p["id"] == *id);
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .context("no resolve graph")?;
    let node = |id: &Value| nodes.iter().find(|n| n["id"] == *id);
    let normal = |dep: &&Value| {
        dep["dep_kinds"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
    };
    let root = packages
        .iter()
        .find(|p| p["name"] == package)
        .with_context(|| format!("cargo metadata lists no package {package}"))?;
    let mut ids = vec![root["id"].clone()];
    let mut found = Vec::new();
    let mut pending = ids.clone();
    while let Some(id) = pending.pop() {
        let deps = node(&id).and_then(|n| n["deps"].as_array());
        for dep in deps.into_iter().flatten().filter(normal) {
            let Some(p) = by_id(&dep["pkg"]) else {
                continue;
            };
            let entry = (
                p["name"].as_str().unwrap_or_default().to_owned(),
                p["version"].as_str().unwrap_or_default().to_owned(),
            );
            if !found.contains(&entry) {
                found.push(entry);
            }
            // Workspace crates (no source) have their own dependencies checked.
            if p["source"].is_null() && !ids.contains(&p["id"]) {
                ids.push(p["id"].clone());
                pending.push(p["id"].clone());
            }
        }
    }
    Ok(found)
}

/// The files under two directories are the same, byte for byte.
pub(crate) fn same_files(one: &Path, two: &Path) -> anyhow::Result<usize> {
    let (a, b) = (files(one)?, files(two)?);
    let names = |files: &[(String, Vec<u8>)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    ensure!(
        names(&a) == names(&b),
        "{} and {} hold different files: {:?} vs {:?}",
        one.display(),
        two.display(),
        names(&a),
        names(&b)
    );
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        if x != y {
            bail!(
                "{name} differs between two builds ({} and {})",
                one.display(),
                two.display()
            );
        }
    }
    Ok(a.len())
}

fn files(dir: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                out.push((name, std::fs::read(&path)?));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo metadata`'s shape: a binary on a workspace crate, which has a
    /// normal, a dev and a build dependency.
    fn metadata() -> Value {
        let id = |name: &str| format!("{name}-id");
        let package = |name: &str, version: &str, local: bool| {
            serde_json::json!({
                "id": id(name), "name": name, "version": version,
                "source": if local { Value::Null } else { "registry+https://github.com/rust-lang/crates.io-index".into() },
            })
        };
        let dep = |name: &str, kind: Value| serde_json::json!({ "pkg": id(name), "dep_kinds": [{ "kind": kind }] });
        serde_json::json!({
            "packages": [
                package("bin", "0.1.0", true),
                package("lib", "0.1.0", true),
                package("tokio", "1.48.0", false),
                package("tempfile", "3.0.0", false),
                package("cc", "1.2.0", false),
            ],
            "resolve": { "nodes": [
                { "id": id("bin"), "deps": [dep("lib", Value::Null)] },
                { "id": id("lib"), "deps": [
                    dep("tokio", Value::Null),
                    dep("tempfile", "dev".into()),
                    dep("cc", "build".into()),
                ] },
            ] },
        })
    }

    #[test]
    fn the_expected_crates_are_the_normal_dependencies_through_workspace_crates() {
        assert_eq!(
            direct_dependencies(&metadata(), "bin").unwrap(),
            [
                ("lib".to_owned(), "0.1.0".to_owned()),
                ("tokio".to_owned(), "1.48.0".to_owned())
            ]
        );
        let err = direct_dependencies(&metadata(), "nope").unwrap_err();
        assert!(err.to_string().contains("no package nope"), "{err}");
    }
}
