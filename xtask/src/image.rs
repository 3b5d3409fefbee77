//! `cargo xtask image`: a reproducible multi-platform OCI image per
//! provider (linux/amd64 and linux/arm64), built from the provider's static
//! musl binaries with no base distribution.

pub(crate) mod binary;
mod check;
pub(crate) mod index;
mod layer;
mod metadata;
pub(crate) mod oci;
pub(crate) mod platform;
mod sbom;
mod tarball;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use jiff::Timestamp;

use crate::cmd::{self, repo_root, run};
use crate::tools::{self, apt};
use metadata::Metadata;
pub(crate) use platform::Platform;

/// The media type of each image's SBOM (CycloneDX JSON).
pub(crate) const SBOM_MEDIA_TYPE: &str = sbom::MEDIA_TYPE;

/// The SBOM's file name in each platform's directory beside the layout.
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
pub(crate) fn provider_name(value: &str) -> Result<String, String> {
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

/// A reproducible multi-platform OCI image of a provider's static binary,
/// under target/images/.
///
/// Builds <provider>-cloud-controller-manager as a static musl release
/// binary for each platform (x86_64 and aarch64; through cargo-auditable,
/// so each carries its dependency list) and writes an image per platform
/// holding only it, a CA bundle, /etc/passwd and /etc/group (user 65532)
/// and /tmp, and an image index over them, under target/images/<provider>/:
///
///   oci/                   an OCI image layout: the index tagged <version>,
///                          each platform's image tagged <version>-linux-<arch>,
///                          each image's SBOM as its referrer
///   linux-<arch>/image.tar that platform's image alone, loadable as an
///                          oci-archive and as a docker-archive
///   linux-<arch>/sbom.cdx.json  its binary's SBOM (CycloneDX 1.5): every
///                          crate in it, with version
///
/// The arm64 binary is cross-compiled with cargo-zigbuild and Zig (from
/// crates.io and PyPI, installed when missing), and --check runs it under
/// qemu-user (Debian's qemu-user-static).
///
/// The image is reproducible: SOURCE_DATE_EPOCH (default: the last commit's
/// time) is its creation time, and nothing else varies between builds.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// The provider whose binary the image holds.
    #[arg(long, value_parser = provider_name)]
    provider: String,
    /// The platforms the image index holds, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = Platform::parse,
        default_value = Platform::DEFAULT,
        verbatim_doc_comment
    )]
    platform: Vec<Platform>,
    /// Also compile the binary crate and build the image a second time and
    /// compare both byte for byte, inspect each image.tar with skopeo
    /// (oci-archive and docker-archive), unpack each platform's image with
    /// umoci and run the binary's --version (under qemu for arm64), fail if
    /// an image exceeds 20 MB compressed; and for the fake provider's arm64
    /// binary, run it under qemu against the test API server until it has
    /// initialized the nodes and provisioned the load balancers.
    #[arg(long, verbatim_doc_comment)]
    check: bool,
    /// With --check: leave out the second compile (the rest of the checks
    /// still run). CI recompiles one provider's binary, not all three: the
    /// second compile re-runs only the binary crate and the link, which
    /// every provider shares, and costs about a minute each.
    #[arg(long, requires = "check", verbatim_doc_comment)]
    no_rebuild: bool,
    /// Copy the image index and every image in it to REF (for example
    /// docker://registry/name:tag) with skopeo, which must be installed.
    #[arg(long, value_name = "REF", verbatim_doc_comment)]
    push: Option<String>,
}

/// One platform's binary and the image made of it.
struct Built {
    platform: Platform,
    binary: PathBuf,
    image: oci::Image,
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    let platforms = platform::distinct(&options.platform);
    let foreign = platforms.iter().any(|p| !p.is_host());
    tools::musl::ensure()?;
    if !Path::new(HOST_CA_BUNDLE).exists() {
        apt::install(&["ca-certificates"])?;
    }
    if options.check {
        tools::skopeo::ensure()?;
        tools::umoci::ensure()?;
        if foreign {
            tools::zig::ensure_qemu()?;
        }
    }
    let meta = metadata(&options.provider)?;
    let mut binaries = Vec::new();
    for &platform in &platforms {
        let (binary, build_time) = binary::build(&options.provider, &meta, platform)?;
        println!(
            "{} binary {} ({}, built in {build_time:.0?})",
            platform.name(),
            binary.display(),
            megabytes(std::fs::metadata(&binary)?.len() as usize),
        );
        binaries.push((platform, binary));
    }
    let out = images_dir().join(&options.provider);
    let (built, index) = write(&binaries, &meta, &out)?;
    println!(
        "
image {} ({})",
        meta.reference(),
        options.provider
    );
    println!("  index       {}", index.index_digest);
    for Built {
        platform, image, ..
    } in &built
    {
        println!(
            "  {:<11} {} compressed {} (layer {}), image.tar {}",
            platform.name(),
            image.manifest_digest,
            megabytes(image.compressed_size()),
            megabytes(image.layer_size),
            megabytes(
                std::fs::metadata(out.join(platform.dir_name()).join("image.tar"))?.len() as usize
            ),
        );
    }
    println!("  written to  {}", out.display());
    if options.check && !options.no_rebuild {
        rebuild_and_compare(&options.provider, &meta, &built, &out)?;
    }
    if options.check {
        for Built {
            platform,
            binary,
            image,
        } in &built
        {
            check(&options.provider, &meta, *platform, image, &out)?;
            if options.provider == "fake" && !platform.is_host() {
                crate::sandbox::check_binary(binary, *platform)?;
            }
        }
    }
    if let Some(reference) = &options.push {
        if !apt::has("skopeo") {
            bail!("--push needs skopeo (apt-get install skopeo)");
        }
        run(Command::new("skopeo")
            .args(["copy", "--all"])
            .arg(format!(
                "oci:{}:{}",
                out.join("oci").display(),
                meta.version
            ))
            .arg(reference))?;
    }
    Ok(())
}

/// `--check`'s second compile of every platform's binary: each must be
/// byte-identical to the first, and so must every file of the image.
fn rebuild_and_compare(
    provider: &str,
    meta: &Metadata,
    built: &[Built],
    out: &Path,
) -> anyhow::Result<()> {
    let mut rebuilt = Vec::new();
    for Built {
        platform, binary, ..
    } in built
    {
        let first = std::fs::read(binary)?;
        let (again, rebuild_time) = binary::rebuild(provider, meta, *platform)?;
        ensure!(
            std::fs::read(&again)? == first,
            "{} is not reproducible: a second compile of it differs from the first",
            again.display()
        );
        println!(
            "second build ({}): the binary recompiled and relinked in {rebuild_time:.0?}, byte-identical",
            platform.name()
        );
        rebuilt.push((*platform, again));
    }
    let again = images_dir().join(".rebuild").join(provider);
    write(&rebuilt, meta, &again)?;
    let files = check::same_files(out, &again)?;
    println!("second build: image of {files} files, byte-identical to the first");
    Ok(())
}

/// `--check` of one platform's image: skopeo, the SBOM, umoci and the size.
fn check(
    provider: &str,
    meta: &Metadata,
    platform: Platform,
    image: &oci::Image,
    out: &Path,
) -> anyhow::Result<()> {
    let dir = out.join(platform.dir_name());
    check::skopeo(
        &dir.join("image.tar"),
        meta,
        platform,
        &image.manifest_digest,
        &layer_diff_id(image)?,
    )?;
    let sbom = std::fs::read(dir.join(sbom::FILE_NAME))?;
    println!("{}", check::sbom(&sbom, &meta.binary_name, platform)?);
    check::umoci(
        &out.join("oci"),
        &images_dir()
            .join(".unpacked")
            .join(provider)
            .join(platform.dir_name()),
        meta,
        platform,
    )?;
    ensure!(
        image.compressed_size() <= MAX_COMPRESSED_BYTES,
        "the {provider} image for {} is {} compressed, over the {} limit",
        platform.name(),
        megabytes(image.compressed_size()),
        megabytes(MAX_COMPRESSED_BYTES)
    );
    Ok(())
}

/// Assembles each platform's image from its binary and the index over
/// them, and writes them under `out`, replacing what was there.
fn write(
    binaries: &[(Platform, PathBuf)],
    meta: &Metadata,
    out: &Path,
) -> anyhow::Result<(Vec<Built>, index::MultiArch)> {
    let ca_bundle =
        std::fs::read(HOST_CA_BUNDLE).with_context(|| format!("reading {HOST_CA_BUNDLE}"))?;
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    let mut built = Vec::new();
    for (platform, binary) in binaries {
        let binary_bytes =
            std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
        ensure!(
            Platform::of_elf(&binary_bytes) == Some(*platform),
            "{} is not a {} binary",
            binary.display(),
            platform.name()
        );
        let layer = layer::build(&layer::Contents {
            binary_name: &meta.binary_name,
            binary: &binary_bytes,
            ca_bundle: &ca_bundle,
        })?;
        let sbom = sbom::of_binary(binary, meta)?;
        let image = oci::assemble(meta, *platform, &layer, &sbom);
        let dir = out.join(platform.dir_name());
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let sbom_file = dir.join(sbom::FILE_NAME);
        std::fs::write(&sbom_file, &sbom)
            .with_context(|| format!("writing {}", sbom_file.display()))?;
        let archive = dir.join("image.tar");
        std::fs::write(&archive, image.archive()?)
            .with_context(|| format!("writing {}", archive.display()))?;
        built.push(Built {
            platform: *platform,
            binary: binary.clone(),
            image,
        });
    }
    let images: Vec<(Platform, &oci::Image)> =
        built.iter().map(|b| (b.platform, &b.image)).collect();
    let index = index::combine(meta, &images);
    index.write_layout(&out.join("oci"))?;
    Ok((built, index))
}

/// The `diff_id` of the image's one layer, from its config.
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
    fn both_platforms_by_default_and_either_alone_on_request() {
        let both = parse(&["--provider", "fake"]).unwrap();
        assert_eq!(both.platform, Platform::ALL);
        let one = parse(&["--provider", "fake", "--platform", "linux/arm64"]).unwrap();
        assert_eq!(one.platform, vec![Platform::Arm64]);
        let listed = parse(&["--provider=fake", "--platform=linux/arm64,linux/amd64"]).unwrap();
        assert_eq!(
            platform::distinct(&listed.platform),
            vec![Platform::Amd64, Platform::Arm64]
        );
        let unknown = parse(&["--provider=fake", "--platform=windows/amd64"]).unwrap_err();
        assert_eq!(unknown.kind(), ErrorKind::ValueValidation);
        assert!(unknown.to_string().contains("windows/amd64"), "{unknown}");
    }

    #[test]
    fn a_provider_without_a_binary_package_is_named_in_the_error() {
        let meta = metadata("nonexistent").unwrap();
        let err = binary::build("nonexistent", &meta, Platform::Amd64)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no `nonexistent-cloud-controller-manager` package"),
            "{err}"
        );
    }
}
