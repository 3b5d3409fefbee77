//! The multi-platform image: an OCI image index listing each platform's
//! manifest with its `platform`, and the OCI layout directory that holds it.
//!
//! The layout's `index.json` lists, in this order:
//! - the image index, tagged with the version (`org.opencontainers.image.ref.name`):
//!   what `skopeo copy --all` and `oras cp` push, and what a node pulls;
//! - each platform's manifest, tagged `<version>-linux-<arch>`, so that
//!   tools without index support (umoci) and an operator can take one;
//! - each platform's SBOM artifact, whose `subject` is that platform's
//!   manifest: `oras cp -r` of the index carries them to the registry as
//!   referrers of the manifests the index lists.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::metadata::Metadata;
use super::oci::{self, Image};
use super::platform::Platform;
use crate::digest::sha256_hex;

/// The layout directory's content, in memory.
#[derive(Debug)]
pub(crate) struct MultiArch {
    /// `sha256:…` of the image index: the multi-platform image's digest.
    pub(crate) index_digest: String,
    /// Every blob: the index, each platform's image and SBOM artifact.
    blobs: BTreeMap<String, Vec<u8>>,
    /// `index.json`.
    layout_index: Vec<u8>,
}

/// The tag of one platform's manifest in the layout: `0.1.0-linux-arm64`.
pub(crate) fn platform_tag(meta: &Metadata, platform: Platform) -> String {
    format!("{}-{}", meta.version, platform.dir_name())
}

/// The index of `images`, one per platform, in the order given.
pub(crate) fn combine(meta: &Metadata, images: &[(Platform, &Image)]) -> MultiArch {
    let manifests: Vec<Value> = images
        .iter()
        .map(|(platform, image)| {
            let mut entry = image.manifest_descriptor.clone();
            entry["platform"] = oci::platform_fields(*platform);
            entry
        })
        .collect();
    let index = oci::to_json(&json!({
        "schemaVersion": 2,
        "mediaType": oci::INDEX,
        "manifests": manifests,
        "annotations": meta.labels(),
    }));
    let index_digest = format!("sha256:{}", sha256_hex(&index));
    let mut tagged =
        json!({ "mediaType": oci::INDEX, "digest": index_digest, "size": index.len() });
    tagged["annotations"] = json!({
        "io.containerd.image.name": meta.reference(),
        "org.opencontainers.image.ref.name": meta.version,
    });
    let mut listed = vec![tagged];
    for ((platform, _), entry) in images.iter().zip(&manifests) {
        let mut entry = entry.clone();
        entry["annotations"] =
            json!({ "org.opencontainers.image.ref.name": platform_tag(meta, *platform) });
        listed.push(entry);
    }
    listed.extend(
        images
            .iter()
            .map(|(_, image)| image.referrer_descriptor.clone()),
    );
    let mut blobs: BTreeMap<String, Vec<u8>> = images
        .iter()
        .flat_map(|(_, image)| image.all_blobs())
        .map(|(hex, bytes)| (hex.clone(), bytes.clone()))
        .collect();
    blobs.insert(sha256_hex(&index), index);
    MultiArch {
        index_digest,
        blobs,
        layout_index: oci::index_of(&json!(listed)),
    }
}

impl MultiArch {
    /// Writes the OCI layout under `dir`, which must not exist.
    pub(crate) fn write_layout(&self, dir: &Path) -> anyhow::Result<()> {
        oci::write_tree(oci::layout_tree(&self.layout_index, self.blobs.iter()), dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::layer::Layer;

    const SBOM: &[u8] = br#"{"bomFormat":"CycloneDX"}"#;

    fn image(platform: Platform, content: &[u8]) -> Image {
        let layer = Layer {
            compressed: content.to_vec(),
            diff_id: format!("sha256:{}", sha256_hex(content)),
        };
        oci::assemble(&Metadata::example(), platform, &layer, SBOM)
    }

    fn blob(layout: &Path, digest: &str) -> Value {
        let hex = digest.trim_start_matches("sha256:");
        serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap())
            .unwrap()
    }

    #[test]
    fn the_layout_tags_the_index_each_platform_and_lists_each_sbom_as_a_referrer() {
        let meta = Metadata::example();
        let (amd64, arm64) = (
            image(Platform::Amd64, b"amd64 layer"),
            image(Platform::Arm64, b"arm64 layer"),
        );
        let multi = combine(
            &meta,
            &[(Platform::Amd64, &amd64), (Platform::Arm64, &arm64)],
        );
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("oci");
        multi.write_layout(&layout).unwrap();
        let listed: Value =
            serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
        let listed = listed["manifests"].as_array().unwrap().clone();
        assert_eq!(listed.len(), 5, "{listed:?}");
        assert_eq!(listed[0]["digest"], multi.index_digest.as_str());
        assert_eq!(listed[0]["mediaType"], oci::INDEX);
        assert_eq!(
            listed[0]["annotations"]["org.opencontainers.image.ref.name"],
            "0.1.0"
        );
        assert_eq!(listed[1]["digest"], amd64.manifest_digest.as_str());
        assert_eq!(
            listed[2]["annotations"]["org.opencontainers.image.ref.name"],
            "0.1.0-linux-arm64"
        );
        for (entry, image) in listed[3..].iter().zip([&amd64, &arm64]) {
            assert_eq!(entry["artifactType"], "application/vnd.cyclonedx+json");
            let artifact = blob(&layout, entry["digest"].as_str().unwrap());
            assert_eq!(
                artifact["subject"]["digest"],
                image.manifest_digest.as_str()
            );
        }
        let index = blob(&layout, &multi.index_digest);
        let platforms: Vec<(Value, Value, Value)> = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["digest"].clone(),
                    m["platform"]["architecture"].clone(),
                    m["platform"]["variant"].clone(),
                )
            })
            .collect();
        assert_eq!(
            platforms,
            vec![
                (json!(amd64.manifest_digest), json!("amd64"), Value::Null),
                (json!(arm64.manifest_digest), json!("arm64"), json!("v8")),
            ]
        );
        assert_eq!(index["annotations"]["io.github.rust-ccm.provider"], "fake");
        let config = blob(
            &layout,
            blob(&layout, &arm64.manifest_digest)["config"]["digest"]
                .as_str()
                .unwrap(),
        );
        assert_eq!(
            (&config["architecture"], &config["variant"]),
            (&json!("arm64"), &json!("v8"))
        );
        let again = combine(
            &meta,
            &[(Platform::Amd64, &amd64), (Platform::Arm64, &arm64)],
        );
        assert_eq!(
            again.index_digest, multi.index_digest,
            "two assemblies differ"
        );
    }
}
