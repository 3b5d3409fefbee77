//! One platform's OCI image around its layer: config, manifest, its SBOM
//! as an OCI 1.1 referrer (an artifact manifest, `artifactType` CycloneDX,
//! whose `subject` is the image's manifest), and one tar of the image alone
//! that is both an oci-archive and a docker-archive (`manifest.json` beside
//! the OCI files, pointing at the same blobs, as `docker save` writes since
//! Docker 25). The layout directory of every platform together, with the
//! image index, is [`super::index`]'s.
//!
//! JSON is written through `serde_json::Value`, whose objects are sorted
//! maps, so key order never depends on insertion or hashing.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use super::layer::{self, Layer};
use super::metadata::Metadata;
use super::platform::Platform;
use super::tarball::{self, Entry, Tree};
use crate::digest::sha256_hex;
use crate::timestamp::rfc3339;

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const INDEX: &str = "application/vnd.oci.image.index.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The empty config an artifact manifest points at (OCI 1.1).
const EMPTY: &str = "application/vnd.oci.empty.v1+json";

/// A complete image, in memory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Image {
    /// Content by hex sha256: config, layer, manifest.
    pub(crate) blobs: BTreeMap<String, Vec<u8>>,
    /// The SBOM referrer's blobs by hex sha256: the SBOM, the empty config,
    /// the artifact manifest; in the layout directory only.
    pub(crate) referrer_blobs: BTreeMap<String, Vec<u8>>,
    /// `sha256:…` of the SBOM's artifact manifest.
    pub(crate) referrer_digest: String,
    /// `sha256:…` of the manifest: the image's digest.
    pub(crate) manifest_digest: String,
    /// The manifest's descriptor (media type, digest, size).
    pub(crate) manifest_descriptor: Value,
    /// The SBOM's artifact manifest's descriptor, with its `artifactType`.
    pub(crate) referrer_descriptor: Value,
    /// The compressed layer's size.
    pub(crate) layer_size: usize,
    /// `index.json` of the tar: the image.
    index: Vec<u8>,
    docker_manifest: Vec<u8>,
}

/// Compact JSON with every object's keys sorted, whether or not serde_json
/// keeps maps in insertion order (its `preserve_order` feature, which other
/// crates in a workspace build may turn on): the bytes, and so the digests,
/// never depend on how xtask was built.
pub(crate) fn to_json(value: &Value) -> Vec<u8> {
    canonical(value).to_string().into_bytes()
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn descriptor(media_type: &str, bytes: &[u8]) -> Value {
    json!({ "mediaType": media_type, "digest": format!("sha256:{}", sha256_hex(bytes)), "size": bytes.len() })
}

/// The OCI `platform` of an index entry or a config: `architecture`, `os`
/// and, for arm64, `variant`.
pub(crate) fn platform_fields(platform: Platform) -> Value {
    let mut fields = json!({ "architecture": platform.architecture(), "os": "linux" });
    if let Some(variant) = platform.variant() {
        fields["variant"] = json!(variant);
    }
    fields
}

/// Assembles the `platform` image of `layer`, described by `meta`, with
/// `sbom` (CycloneDX JSON) as its referrer.
pub(crate) fn assemble(meta: &Metadata, platform: Platform, layer: &Layer, sbom: &[u8]) -> Image {
    let labels = meta.labels();
    let created = rfc3339(meta.created);
    let mut config = json!({
        "created": created,
        "config": {
            "User": format!("{0}:{0}", layer::USER_ID),
            "Entrypoint": [format!("/bin/{}", meta.binary_name)],
            "Env": ["PATH=/bin", format!("SSL_CERT_FILE=/{}", layer::CA_BUNDLE)],
            "WorkingDir": "/",
            "ExposedPorts": { "10258/tcp": {} },
            "Labels": labels,
        },
        "rootfs": { "type": "layers", "diff_ids": [layer.diff_id] },
        "history": [{ "created": created, "created_by": format!("cargo xtask image --provider {} --platform {}", meta.provider, platform.name()) }],
    });
    if let (Value::Object(config), Value::Object(fields)) = (&mut config, platform_fields(platform))
    {
        config.extend(fields);
    }
    let config = to_json(&config);
    let manifest = to_json(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor(CONFIG, &config),
        "layers": [descriptor(LAYER, &layer.compressed)],
        "annotations": labels,
    }));
    let manifest_descriptor = descriptor(MANIFEST, &manifest);
    let mut manifest_entry = manifest_descriptor.clone();
    manifest_entry["annotations"] = json!({
        "io.containerd.image.name": meta.reference(),
        "org.opencontainers.image.ref.name": meta.version,
    });
    let referrer = referrer(&manifest, sbom, &created);
    let mut referrer_entry = descriptor(MANIFEST, &referrer.manifest);
    referrer_entry["artifactType"] = json!(super::sbom::MEDIA_TYPE);
    let index = index_of(&json!([manifest_entry]));
    let blob_path = |bytes: &[u8]| format!("blobs/sha256/{}", sha256_hex(bytes));
    let docker_manifest = to_json(&json!([{
        "Config": blob_path(&config),
        "RepoTags": [meta.reference()],
        "Layers": [blob_path(&layer.compressed)],
    }]));
    let manifest_digest = format!("sha256:{}", sha256_hex(&manifest));
    let blobs = [config, layer.compressed.clone(), manifest]
        .into_iter()
        .map(|b| (sha256_hex(&b), b))
        .collect();
    Image {
        blobs,
        referrer_digest: format!("sha256:{}", sha256_hex(&referrer.manifest)),
        referrer_blobs: [referrer.sbom, referrer.config, referrer.manifest]
            .into_iter()
            .map(|b| (sha256_hex(&b), b))
            .collect(),
        manifest_digest,
        manifest_descriptor,
        referrer_descriptor: referrer_entry,
        layer_size: layer.compressed.len(),
        index,
        docker_manifest,
    }
}

/// An OCI `index.json` (or image index blob) listing `manifests`.
pub(crate) fn index_of(manifests: &Value) -> Vec<u8> {
    to_json(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": manifests,
    }))
}

/// An SBOM as an artifact: its blob, the empty config, and the manifest
/// that refers to the image's.
struct Referrer {
    sbom: Vec<u8>,
    config: Vec<u8>,
    manifest: Vec<u8>,
}

fn referrer(image_manifest: &[u8], sbom: &[u8], created: &str) -> Referrer {
    let config = b"{}".to_vec();
    let mut layer = descriptor(super::sbom::MEDIA_TYPE, sbom);
    layer["annotations"] = json!({ "org.opencontainers.image.title": super::sbom::FILE_NAME });
    let manifest = to_json(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "artifactType": super::sbom::MEDIA_TYPE,
        "config": descriptor(EMPTY, &config),
        "layers": [layer],
        "subject": descriptor(MANIFEST, image_manifest),
        "annotations": { "org.opencontainers.image.created": created },
    }));
    Referrer {
        sbom: sbom.to_vec(),
        config,
        manifest,
    }
}

impl Image {
    /// The OCI layout of the image alone: `oci-layout`, `index.json`,
    /// `blobs/sha256/*`.
    fn layout(&self) -> Tree {
        layout_tree(&self.index, self.blobs.iter())
    }

    /// The tar that loads as an oci-archive and as a docker-archive.
    pub(crate) fn archive(&self) -> anyhow::Result<Vec<u8>> {
        let mut tree = self.layout();
        tarball::insert(
            &mut tree,
            "manifest.json",
            Entry::File {
                mode: 0o644,
                data: self.docker_manifest.clone(),
            },
        );
        tarball::archive(&tree)
    }

    /// Every blob of the image, then its SBOM referrer's.
    pub(crate) fn all_blobs(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        self.blobs.iter().chain(self.referrer_blobs.iter())
    }

    /// Bytes a node pulls: every blob of the image (not the SBOM's).
    pub(crate) fn compressed_size(&self) -> usize {
        self.blobs.values().map(Vec::len).sum()
    }
}

/// An OCI layout: `oci-layout`, `index` as `index.json`, and `blobs`.
pub(crate) fn layout_tree<'a>(
    index: &[u8],
    blobs: impl Iterator<Item = (&'a String, &'a Vec<u8>)>,
) -> Tree {
    let file = |data: &[u8]| Entry::File {
        mode: 0o644,
        data: data.to_vec(),
    };
    let mut tree = Tree::new();
    tarball::insert(
        &mut tree,
        "oci-layout",
        file(br#"{"imageLayoutVersion":"1.0.0"}"#),
    );
    tarball::insert(&mut tree, "index.json", file(index));
    for (hex, bytes) in blobs {
        tarball::insert(&mut tree, &format!("blobs/sha256/{hex}"), file(bytes));
    }
    tree
}

/// Writes `tree` under `dir`, which must not exist.
pub(crate) fn write_tree(tree: Tree, dir: &Path) -> anyhow::Result<()> {
    for (path, entry) in tree {
        let target = dir.join(&path);
        match entry {
            Entry::Dir { .. } => std::fs::create_dir_all(&target),
            Entry::File { data, .. } => std::fs::create_dir_all(target.parent().unwrap_or(dir))
                .and_then(|()| std::fs::write(&target, data)),
        }
        .with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Metadata {
        Metadata::example()
    }

    const SBOM: &[u8] = br#"{"bomFormat":"CycloneDX"}"#;

    fn layer() -> Layer {
        Layer {
            compressed: b"layer".to_vec(),
            diff_id: "sha256:00".into(),
        }
    }

    #[test]
    fn the_manifest_points_at_the_config_and_layer_blobs() {
        let image = assemble(&meta(), Platform::Amd64, &layer(), SBOM);
        let manifest_hex = image.manifest_digest.trim_start_matches("sha256:");
        let manifest: Value = serde_json::from_slice(&image.blobs[manifest_hex]).unwrap();
        let config_hex = manifest["config"]["digest"]
            .as_str()
            .unwrap()
            .trim_start_matches("sha256:");
        let config: Value = serde_json::from_slice(&image.blobs[config_hex]).unwrap();
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(
            config["config"]["Entrypoint"][0],
            "/bin/fake-cloud-controller-manager"
        );
        assert_eq!(
            config["config"]["Labels"]["io.github.rust-ccm.provider"],
            "fake"
        );
        assert_eq!(config["rootfs"]["diff_ids"][0], "sha256:00");
        assert_eq!(config["created"], "2023-11-14T22:13:20Z");
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.created"],
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(manifest["layers"][0]["size"], 5);
        assert_eq!(image.blobs.len(), 3);
    }

    #[test]
    fn label_keys_are_serialized_in_sorted_order() {
        let image = assemble(&meta(), Platform::Amd64, &layer(), SBOM);
        let config = image
            .blobs
            .values()
            .find(|b| b.starts_with(b"{\"architecture\""))
            .expect("a config blob");
        let text = String::from_utf8(config.clone()).unwrap();
        let positions: Vec<usize> = meta()
            .labels()
            .keys()
            .map(|k| text.find(k).unwrap())
            .collect();
        assert!(positions.is_sorted(), "labels out of order in {text}");
    }

    #[test]
    fn the_archive_is_an_oci_layout_plus_a_docker_manifest() {
        let image = assemble(&meta(), Platform::Amd64, &layer(), SBOM);
        let bytes = image.archive().unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let paths: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(
            paths
                .iter()
                .filter(|p| p.starts_with("blobs/sha256/") && p.len() > 13)
                .count(),
            3
        );
        for required in ["oci-layout", "index.json", "manifest.json"] {
            assert!(
                paths.iter().any(|p| p == required),
                "{required} missing from {paths:?}"
            );
        }
        let docker: Value = serde_json::from_slice(&image.docker_manifest).unwrap();
        assert_eq!(
            docker[0]["RepoTags"][0],
            "registry.example/fake-cloud-controller-manager:0.1.0"
        );
        assert_eq!(
            assemble(&meta(), Platform::Amd64, &layer(), SBOM)
                .archive()
                .unwrap(),
            bytes,
            "two assemblies differ"
        );
    }
}
