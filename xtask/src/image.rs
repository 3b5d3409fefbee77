//! `cargo xtask image`: a reproducible OCI image per provider, built from
//! the provider's static musl binary with no base distribution.

pub(crate) mod binary;
mod check;
mod layer;
pub(crate) mod oci;
mod sbom;
mod tarball;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use jiff::Timestamp;

use crate::cmd::{self, repo_root, run};
use crate::tools::{self, apt};
use oci::Metadata;

/// The media type of each image's SBOM (CycloneDX JSON).
pub(crate) const SBOM_MEDIA_TYPE: &str = sbom::MEDIA_TYPE;

/// The SBOM's file name beside each image's layout.
pub(crate) const SBOM_FILE_NAME: &str = sbom::FILE_NAME;

/// The providers `--provider` accepts: every binary crate
/// `cmd/<provider>-cloud-controller-manager`, in name order, so that a
/// provider `cargo xtask new-provider` made has its image at once;
/// `cargo xtask ci` builds and checks every one's image.
pub(crate) fn providers() -> Vec<String> {
    providers_in(&repo_root())
}

fn providers_in(root: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(root.join("cmd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix("-cloud-controller-manager")
                .map(str::to_owned)
        })
        .collect();
    found.sort();
    found
}

/// `--provider`'s parser: one of [`providers`].
fn provider(value: &str) -> Result<String, String> {
    let known = providers();
    if known.iter().any(|p| p == value) {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "no binary cmd/{value}-cloud-controller-manager; one of: {}",
            known.join(", ")
        ))
    }
}

/// Where images are published; `cargo xtask image` never pushes there itself.
const REPOSITORY: &str = "ghcr.io/rust-ccm";

/// The most an image may weigh compressed (its blobs, what a node pulls).
const MAX_COMPRESSED_BYTES: usize = 20_000_000;

/// The CA bundle copied into images, from Debian's `ca-certificates`.
const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A reproducible OCI image of a provider's static binary, under target/images/.
///
/// Builds <provider>-cloud-controller-manager as a static
/// x86_64-unknown-linux-musl release binary (through cargo-auditable, so it
/// carries its dependency list) and writes an OCI image holding only it, a
/// CA bundle, /etc/passwd and /etc/group (user 65532) and /tmp, under
/// target/images/<provider>/:
///
///   oci/            an OCI image layout, with the SBOM as the image's referrer
///   image.tar       the image alone, loadable as an oci-archive and as a docker-archive
///   sbom.cdx.json   the binary's SBOM (CycloneDX 1.5): every crate in it, with version
///
/// The image is reproducible: SOURCE_DATE_EPOCH (default: the last commit's
/// time) is its creation time, and nothing else varies between builds.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// The provider whose binary the image holds.
    #[arg(long, value_parser = provider)]
    provider: String,
    /// Also compile the binary crate and build the image a second time and
    /// compare both byte for byte, inspect image.tar with skopeo (oci-archive
    /// and docker-archive), unpack the layout with umoci and run the binary's
    /// --version, and fail if the image exceeds 20 MB compressed.
    #[arg(long, verbatim_doc_comment)]
    check: bool,
    /// With --check: leave out the second compile (the rest of the checks
    /// still run). CI recompiles one provider's binary, not all three: the
    /// second compile re-runs only the binary crate and the link, which
    /// every provider shares, and costs about a minute each.
    #[arg(long, requires = "check", verbatim_doc_comment)]
    no_rebuild: bool,
    /// Copy the image to REF (for example docker://registry/name:tag) with
    /// skopeo, which must be installed.
    #[arg(long, value_name = "REF", verbatim_doc_comment)]
    push: Option<String>,
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    tools::musl::ensure()?;
    if !Path::new(HOST_CA_BUNDLE).exists() {
        apt::install(&["ca-certificates"])?;
    }
    if options.check {
        tools::skopeo::ensure()?;
        tools::umoci::ensure()?;
    }
    let meta = metadata(&options.provider)?;
    let (binary, build_time) = binary::build(&options.provider, &meta)?;
    let out = images_dir().join(&options.provider);
    let image = write(&binary, &meta, &out)?;
    let binary_size = std::fs::metadata(&binary)?.len();
    let archive_size = std::fs::metadata(out.join("image.tar"))?.len();
    println!(
        "\nimage {} ({})\n  digest      {}\n  binary      {} ({}, built in {:.0?})\n  compressed  {} (layer {})\n  image.tar   {}\n  written to  {}",
        meta.reference(),
        options.provider,
        image.manifest_digest,
        binary.display(),
        megabytes(binary_size as usize),
        build_time,
        megabytes(image.compressed_size()),
        megabytes(image.layer_size),
        megabytes(archive_size as usize),
        out.display(),
    );
    if options.check && !options.no_rebuild {
        let first = std::fs::read(&binary)?;
        let (rebuilt, rebuild_time) = binary::rebuild(&options.provider, &meta)?;
        ensure!(
            std::fs::read(&rebuilt)? == first,
            "{} is not reproducible: a second compile of it differs from the first",
            rebuilt.display()
        );
        let again = images_dir().join(".rebuild").join(&options.provider);
        write(&rebuilt, &meta, &again)?;
        let files = check::same_files(&out, &again)?;
        println!(
            "second build: the binary recompiled and relinked in {rebuild_time:.0?}; image of {files} files, byte-identical to the first"
        );
    }
    if options.check {
        check::skopeo(
            &out.join("image.tar"),
            &meta,
            &image.manifest_digest,
            &layer_diff_id(&image)?,
        )?;
        let sbom = std::fs::read(out.join(sbom::FILE_NAME))?;
        println!("{}", check::sbom(&sbom, &meta.binary_name)?);
        check::umoci(
            &out.join("oci"),
            &images_dir().join(".unpacked").join(&options.provider),
            &meta,
        )?;
        ensure!(
            image.compressed_size() <= MAX_COMPRESSED_BYTES,
            "the {} image is {} compressed, over the {} limit",
            options.provider,
            megabytes(image.compressed_size()),
            megabytes(MAX_COMPRESSED_BYTES)
        );
    }
    if let Some(reference) = &options.push {
        if !apt::has("skopeo") {
            bail!("--push needs skopeo (apt-get install skopeo)");
        }
        run(Command::new("skopeo")
            .arg("copy")
            .arg(format!("oci-archive:{}", out.join("image.tar").display()))
            .arg(reference))?;
    }
    Ok(())
}

/// Assembles the image from `binary` and writes it under `out`, replacing
/// what was there.
fn write(binary: &Path, meta: &Metadata, out: &Path) -> anyhow::Result<oci::Image> {
    let binary_bytes =
        std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    let ca_bundle =
        std::fs::read(HOST_CA_BUNDLE).with_context(|| format!("reading {HOST_CA_BUNDLE}"))?;
    let layer = layer::build(&layer::Contents {
        binary_name: &meta.binary_name,
        binary: &binary_bytes,
        ca_bundle: &ca_bundle,
    })?;
    let sbom = sbom::of_binary(binary, meta)?;
    let image = oci::assemble(meta, &layer, &sbom);
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    image.write_layout(&out.join("oci"))?;
    let sbom_file = out.join(sbom::FILE_NAME);
    std::fs::write(&sbom_file, &sbom)
        .with_context(|| format!("writing {}", sbom_file.display()))?;
    let archive = out.join("image.tar");
    std::fs::write(&archive, image.archive()?)
        .with_context(|| format!("writing {}", archive.display()))?;
    Ok(image)
}

fn layer_diff_id(image: &oci::Image) -> anyhow::Result<String> {
    let hex = image.manifest_digest.trim_start_matches("sha256:");
    let manifest: serde_json::Value = serde_json::from_slice(&image.blobs[hex])?;
    let config_hex = manifest["config"]["digest"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("sha256:");
    let config: serde_json::Value =
        serde_json::from_slice(image.blobs.get(config_hex).context("no config blob")?)?;
    config["rootfs"]["diff_ids"][0]
        .as_str()
        .map(str::to_owned)
        .context("the config has no diff_id")
}

/// The image's facts: what it holds, the checkout's commit and the
/// creation time.
pub(crate) fn metadata(provider: &str) -> anyhow::Result<Metadata> {
    let root = repo_root();
    let git = |args: &[&str]| {
        cmd::output(
            "git",
            &[&["-C", &root.display().to_string()], args].concat(),
        )
        .map(|s| s.trim().to_owned())
    };
    let created = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(epoch) => epoch
            .trim()
            .parse()
            .ok()
            .and_then(|seconds| Timestamp::from_second(seconds).ok())
            .with_context(|| {
                format!("SOURCE_DATE_EPOCH={epoch}: expected seconds since the epoch")
            })?,
        Err(_) => git(&["log", "-1", "--format=%ct"])
            .and_then(|s| s.parse().ok())
            .and_then(|seconds| Timestamp::from_second(seconds).ok())
            .unwrap_or(Timestamp::UNIX_EPOCH),
    };
    let binary_name = binary::package(provider);
    Ok(Metadata {
        provider: provider.to_owned(),
        repository: format!("{REPOSITORY}/{binary_name}"),
        binary_name,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        revision: git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned()),
        source: env!("CARGO_PKG_REPOSITORY").to_owned(),
        created,
    })
}

/// `target/images`.
fn images_dir() -> PathBuf {
    cmd::target_dir().join("images")
}

fn megabytes(bytes: usize) -> String {
    format!("{:.2} MB", bytes as f64 / 1_000_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::error::ErrorKind;

    use crate::{Task, parse_task};

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        match parse_task(&[&["image"], args].concat())? {
            Task::Image(options) => Ok(options),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_provider_is_required_and_must_be_known() {
        assert_eq!(
            parse(&[]).unwrap_err().kind(),
            ErrorKind::MissingRequiredArgument
        );
        let unknown = parse(&["--provider", "gcp"]).unwrap_err();
        assert_eq!(unknown.kind(), ErrorKind::ValueValidation);
        let message = unknown.to_string();
        assert!(
            message.contains("gcp") && message.contains("aws, digitalocean, fake"),
            "{message}"
        );
        let providers = providers();
        for shipped in ["aws", "digitalocean", "fake"] {
            assert!(
                providers.iter().any(|p| p == shipped),
                "{shipped}: {providers:?}"
            );
        }
        for provider in &providers {
            assert_eq!(
                &parse(&["--provider", provider]).unwrap().provider,
                provider
            );
        }
        let options = parse(&["--provider=fake", "--check", "--push", "oci:x"]).unwrap();
        assert_eq!(
            (
                options.provider.as_str(),
                options.check,
                options.push.as_deref()
            ),
            ("fake", true, Some("oci:x"))
        );
    }

    #[test]
    fn a_provider_without_a_binary_package_is_named_in_the_error() {
        let meta = metadata("nonexistent").unwrap();
        let err = binary::build("nonexistent", &meta).unwrap_err().to_string();
        assert!(
            err.contains("no `nonexistent-cloud-controller-manager` package"),
            "{err}"
        );
    }
}
