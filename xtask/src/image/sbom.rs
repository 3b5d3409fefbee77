//! The image's software bill of materials: the dependency list
//! cargo-auditable embedded in the binary at its link, read back with
//! `auditable-info` and written as CycloneDX 1.5 JSON with `cyclonedx-bom`.
//!
//! Made from the binary, not from `Cargo.lock`, it lists exactly the crates
//! compiled into that binary with the feature set its build resolved, and
//! the build-time ones (proc macros, build scripts) with scope `excluded`.
//! Nothing in it varies between builds of one commit: no serial number, and
//! the image's creation time as its timestamp.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail, ensure};
use auditable_serde::{DependencyKind, Package, Source, VersionInfo};
use cyclonedx_bom::models::component::{Classification, Scope};
use cyclonedx_bom::models::dependency::{Dependencies, Dependency};
use cyclonedx_bom::models::property::{Properties, Property};
use cyclonedx_bom::prelude::{
    Bom, Component, Components, DateTime, Metadata as BomMetadata, Purl, SpecVersion, Validate,
};
use serde_json::Value;

use super::metadata::Metadata;
use crate::timestamp::rfc3339;

/// The SBOM's media type, in the OCI layout and beside it.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.cyclonedx+json";

/// Its file name beside the image layout.
pub(crate) const FILE_NAME: &str = "sbom.cdx.json";

/// The SBOM of `binary`, from the dependency list embedded in it.
pub(crate) fn of_binary(binary: &Path, meta: &Metadata) -> anyhow::Result<Vec<u8>> {
    let info =
        auditable_info::audit_info_from_file(binary, Default::default()).with_context(|| {
            format!(
                "reading the dependency list cargo-auditable embeds from {}",
                binary.display()
            )
        })?;
    cyclonedx(&info, meta)
}

/// `info` as a CycloneDX 1.5 document whose top component is the image's
/// binary.
fn cyclonedx(info: &VersionInfo, meta: &Metadata) -> anyhow::Result<Vec<u8>> {
    let refs = bom_refs(&info.packages);
    let root = info
        .packages
        .iter()
        .position(|p| p.root)
        .context("the embedded dependency list names no root package")?;
    let mut top = component(&info.packages[root], &refs[root]);
    top.component_type = Classification::Application;
    let timestamp = DateTime::try_from(rfc3339(meta.created))
        .map_err(|err| anyhow::anyhow!("the image's creation time: {err}"))?;
    let components = info
        .packages
        .iter()
        .zip(&refs)
        .filter(|(package, _)| !package.root)
        .map(|(package, bom_ref)| component(package, bom_ref))
        .collect();
    let dependencies = info
        .packages
        .iter()
        .zip(&refs)
        .map(|(package, bom_ref)| Dependency {
            dependency_ref: bom_ref.clone(),
            dependencies: package
                .dependencies
                .iter()
                .filter_map(|&index| refs.get(index).cloned())
                .collect(),
        })
        .collect();
    let bom = Bom {
        serial_number: None,
        spec_version: SpecVersion::V1_5,
        metadata: Some(BomMetadata {
            timestamp: Some(timestamp),
            component: Some(top),
            ..BomMetadata::default()
        }),
        components: Some(Components(components)),
        dependencies: Some(Dependencies(dependencies)),
        ..Bom::default()
    };
    let validation = bom.validate();
    if !validation.passed() {
        bail!("the SBOM is not valid CycloneDX 1.5: {validation:?}");
    }
    let mut json = Vec::new();
    bom.output_as_json_v1_5(&mut json)
        .map_err(|err| anyhow::anyhow!("writing the SBOM: {err}"))?;
    json.push(b'\n');
    Ok(json)
}

/// Each package's `bom-ref`: `name@version`, with the package's index
/// added where two share both.
fn bom_refs(packages: &[Package]) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for package in packages {
        *seen
            .entry(format!("{}@{}", package.name, package.version))
            .or_default() += 1;
    }
    packages
        .iter()
        .enumerate()
        .map(|(index, package)| {
            let plain = format!("{}@{}", package.name, package.version);
            if seen[&plain] > 1 {
                format!("{plain}#{index}")
            } else {
                plain
            }
        })
        .collect()
}

fn component(package: &Package, bom_ref: &str) -> Component {
    let version = package.version.to_string();
    let mut component = Component::new(
        Classification::Library,
        &package.name,
        &version,
        Some(bom_ref.to_owned()),
    );
    // Package URLs name crates.io's crates; scanners match on them.
    if package.source == Source::CratesIo {
        component.purl = Purl::new("cargo", &package.name, &version).ok();
    }
    if package.kind == DependencyKind::Build {
        component.scope = Some(Scope::Excluded);
    }
    component.properties = Some(Properties(vec![Property::new(
        "cargo:source",
        &String::from(package.source.clone()),
    )]));
    component
}

/// The crates an SBOM lists with their versions: `(name, version)` of every
/// component, the top one included.
pub(crate) fn crates(sbom: &[u8]) -> anyhow::Result<Vec<(String, String)>> {
    let doc: Value = serde_json::from_slice(sbom).context("the SBOM is not JSON")?;
    ensure!(
        doc["bomFormat"] == "CycloneDX" && doc["specVersion"] == "1.5",
        "not a CycloneDX 1.5 document: bomFormat {}, specVersion {}",
        doc["bomFormat"],
        doc["specVersion"]
    );
    let listed = doc["components"].as_array().into_iter().flatten();
    Ok(std::iter::once(&doc["metadata"]["component"])
        .chain(listed)
        .filter_map(|c| {
            Some((
                c["name"].as_str()?.to_owned(),
                c["version"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Metadata {
        Metadata::example()
    }

    /// What cargo-auditable embeds, in its own JSON format.
    fn info() -> VersionInfo {
        r#"{"packages":[
            {"name":"fake-cloud-controller-manager","version":"0.1.0","source":"local","dependencies":[1,2],"root":true},
            {"name":"tokio","version":"1.48.0","source":"crates.io","dependencies":[3]},
            {"name":"cc","version":"1.2.0","source":"crates.io","kind":"build"},
            {"name":"ccm-app","version":"0.1.0","source":"local"}
        ]}"#
        .parse()
        .unwrap()
    }

    #[test]
    fn every_embedded_crate_is_listed_with_its_version_and_package_url() {
        let sbom = cyclonedx(&info(), &meta()).unwrap();
        let doc: Value = serde_json::from_slice(&sbom).unwrap();
        assert_eq!(
            doc["metadata"]["component"]["name"],
            "fake-cloud-controller-manager"
        );
        assert_eq!(doc["metadata"]["component"]["type"], "application");
        assert_eq!(doc["metadata"]["timestamp"], "2023-11-14T22:13:20Z");
        assert!(doc.get("serialNumber").is_none(), "{doc}");
        let components = doc["components"].as_array().unwrap();
        assert_eq!(components.len(), 3);
        let tokio = &components[0];
        assert_eq!(
            (&tokio["name"], &tokio["version"], &tokio["purl"]),
            (
                &Value::from("tokio"),
                &Value::from("1.48.0"),
                &Value::from("pkg:cargo/tokio@1.48.0")
            )
        );
        assert_eq!(components[1]["scope"], "excluded", "a build dependency");
        assert!(components[2].get("purl").is_none(), "a workspace crate");
        let root_deps = &doc["dependencies"][0];
        assert_eq!(root_deps["ref"], "fake-cloud-controller-manager@0.1.0");
        assert_eq!(
            root_deps["dependsOn"],
            serde_json::json!(["tokio@1.48.0", "cc@1.2.0"])
        );
        assert_eq!(
            crates(&sbom).unwrap()[..2],
            [
                ("fake-cloud-controller-manager".into(), "0.1.0".into()),
                ("tokio".into(), "1.48.0".into())
            ]
        );
    }

    #[test]
    fn the_same_binary_gives_the_same_bytes() {
        assert_eq!(
            cyclonedx(&info(), &meta()).unwrap(),
            cyclonedx(&info(), &meta()).unwrap()
        );
    }

    #[test]
    fn a_binary_without_the_embedded_list_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"\x7fELF not really").unwrap();
        let err = format!("{:#}", of_binary(&plain, &meta()).unwrap_err());
        assert!(
            err.contains("cargo-auditable") && err.contains("plain"),
            "{err}"
        );
    }

    #[test]
    fn a_document_of_another_format_is_refused() {
        let err = crates(br#"{"spdxVersion":"SPDX-2.3"}"#).unwrap_err();
        assert!(err.to_string().contains("CycloneDX"), "{err}");
    }
}
