//! `cargo xtask release`: what a `v*` tag publishes, step by step, as the
//! release workflow (`.github/workflows/release.yml`) runs it and as
//! `cargo xtask ci` runs it against a registry on loopback.

mod registry;
mod verify;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, ensure};

use crate::cmd::{self, run};
use crate::digest::sha256_hex;
use crate::image::Platform;
use crate::image::binary::package;
use crate::tools;

pub(crate) use registry::Registry;

/// Publishes every provider's image with its SBOMs, and the chart.
///
/// For each provider: its multi-platform image built and checked (`cargo
/// xtask image --platform … --check --no-rebuild`), the image index and
/// every platform's image pushed with skopeo (`copy --all`) to
/// REGISTRY/<binary>:<version>, and each platform's SBOM pushed as the OCI
/// referrer of that platform's image with `oras cp -r` (from the image's
/// layout, where each SBOM already refers to its image). Then the chart,
/// checked and pushed to oci://REGISTRY/charts. Last, the release's files
/// under target/dist/: each SBOM, the chart's package, IMAGES (each pushed
/// reference with its index's digest) and SHA256SUMS over them, which the
/// workflow attaches to the GitHub release.
///
/// With RELEASE_REGISTRY_USER and RELEASE_REGISTRY_PASSWORD set, skopeo,
/// oras and helm first log in to the registry's host (the password goes
/// through stdin, never on a command line or into the output).
///
/// --dry-run prints the plan and runs nothing.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// The registry and namespace images and the chart go to.
    #[arg(long, default_value = "ghcr.io/rust-ccm")]
    registry: String,
    /// The registry speaks plain HTTP (a loopback one).
    #[arg(long)]
    plain_http: bool,
    /// Print every step and run none.
    #[arg(long)]
    dry_run: bool,
    /// Publish only this provider's image (repeatable; default: every
    /// provider's).
    #[arg(long = "provider", value_name = "PROVIDER", value_parser = crate::image::provider_name, verbatim_doc_comment)]
    providers: Vec<String>,
    /// The platforms each image holds, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = Platform::parse,
        default_value = Platform::DEFAULT
    )]
    platform: Vec<Platform>,
    /// Publish to a docker-registry started on loopback instead, then read
    /// everything back: each image's manifest and SBOM referrer (skopeo,
    /// oras), the chart (helm pull and template), SHA256SUMS. CI runs this.
    #[arg(long, conflicts_with_all = ["registry", "plain_http", "dry_run"], verbatim_doc_comment)]
    loopback: bool,
}

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// `cargo xtask <args>`, run in this process.
    Task(Vec<String>),
    /// A tool's command line.
    Tool(Vec<String>),
    /// target/dist/'s files: SBOMs, the chart, IMAGES, SHA256SUMS.
    Assets,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Task(args) => write!(f, "cargo xtask {}", args.join(" ")),
            Self::Tool(args) => write!(f, "{}", args.join(" ")),
            Self::Assets => write!(
                f,
                "write target/dist/: each SBOM, the chart package, IMAGES and SHA256SUMS"
            ),
        }
    }
}

/// Where a provider's image goes: `REGISTRY/<binary>:<version>`.
pub(crate) fn image_reference(registry: &str, provider: &str) -> String {
    format!(
        "{registry}/{}:{}",
        package(provider),
        env!("CARGO_PKG_VERSION")
    )
}

/// The image layout `cargo xtask image` writes for `provider`, with its tag.
fn layout(provider: &str) -> String {
    format!(
        "{}:{}",
        cmd::target_dir()
            .join("images")
            .join(provider)
            .join("oci")
            .display(),
        env!("CARGO_PKG_VERSION")
    )
}

impl Options {
    /// The providers to publish: those named, else every one.
    fn providers(&self) -> Vec<String> {
        if self.providers.is_empty() {
            crate::image::providers()
        } else {
            self.providers.clone()
        }
    }

    /// `--platform`'s value as `cargo xtask image` takes it.
    fn platforms(&self) -> String {
        crate::image::platform::distinct(&self.platform)
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn plan(options: &Options, providers: &[String]) -> Vec<Step> {
    let strings = |args: &[&str]| args.iter().map(|&a| a.to_owned()).collect::<Vec<_>>();
    let mut steps = Vec::new();
    for provider in providers {
        let reference = image_reference(&options.registry, provider);
        let layout = layout(provider);
        steps.push(Step::Task(strings(&[
            "image",
            "--provider",
            provider,
            "--platform",
            &options.platforms(),
            "--check",
            "--no-rebuild",
        ])));
        let mut skopeo = strings(&["skopeo", "copy", "--all"]);
        if options.plain_http {
            skopeo.push("--dest-tls-verify=false".into());
        }
        skopeo.extend([format!("oci:{layout}"), format!("docker://{reference}")]);
        steps.push(Step::Tool(skopeo));
        let mut oras = strings(&["oras", "cp", "--recursive", "--from-oci-layout"]);
        if options.plain_http {
            oras.push("--to-plain-http".into());
        }
        oras.extend([layout, reference]);
        steps.push(Step::Tool(oras));
    }
    let mut chart = strings(&["chart", "--static", "--push"]);
    chart.push(format!("oci://{}/charts", options.registry));
    if options.plain_http {
        chart.push("--plain-http".into());
    }
    steps.push(Step::Task(chart));
    steps.push(Step::Assets);
    steps
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    if options.loopback {
        return verify::against_loopback_registry(options);
    }
    publish(options)
}

fn publish(options: &Options) -> anyhow::Result<()> {
    let steps = plan(options, &options.providers());
    println!(
        "release {} to {}: {} steps",
        env!("CARGO_PKG_VERSION"),
        options.registry,
        steps.len()
    );
    for (n, step) in steps.iter().enumerate() {
        println!("  {:>2}. {step}", n + 1);
    }
    if options.dry_run {
        println!("--dry-run: nothing run");
        return Ok(());
    }
    tools::skopeo::ensure()?;
    tools::helm::ensure()?;
    let oras = tools::go_install::ORAS.ensure()?;
    login(&options.registry, &oras)?;
    for step in &steps {
        println!("\nrelease: {step}");
        match step {
            Step::Task(args) => {
                crate::run_task(std::iter::once("xtask").chain(args.iter().map(String::as_str)))?;
            }
            Step::Tool(args) => {
                let program = match args[0].as_str() {
                    "oras" => oras.clone(),
                    other => PathBuf::from(other),
                };
                run(Command::new(program).args(&args[1..]))?;
            }
            Step::Assets => assets(options)?,
        }
    }
    println!(
        "\nrelease: published; the release's files are in {}",
        assets_dir().display()
    );
    Ok(())
}

/// Logs skopeo, oras and helm in to `registry`'s host when
/// RELEASE_REGISTRY_USER and RELEASE_REGISTRY_PASSWORD are set.
fn login(registry: &str, oras: &Path) -> anyhow::Result<()> {
    let (Ok(user), Ok(password)) = (
        std::env::var("RELEASE_REGISTRY_USER"),
        std::env::var("RELEASE_REGISTRY_PASSWORD"),
    ) else {
        return Ok(());
    };
    let host = registry.split('/').next().unwrap_or(registry);
    let helm = tools::helm::binary();
    let logins: [(&Path, &[&str]); 3] = [
        (Path::new("skopeo"), &["login"]),
        (oras, &["login"]),
        (&helm, &["registry", "login"]),
    ];
    for (program, verb) in logins {
        let mut child = Command::new(program)
            .args(verb)
            .args([host, "--username", &user, "--password-stdin"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} login", program.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            std::io::Write::write_all(&mut stdin, password.as_bytes())?;
        }
        let status = child.wait()?;
        ensure!(
            status.success(),
            "{} could not log in to {host} as {user} ({status})",
            program.display()
        );
    }
    println!("release: skopeo, oras and helm logged in to {host} as {user}");
    Ok(())
}

/// `target/dist`: the files the GitHub release carries. Not cargo's
/// `target/release`: clearing that would delete the host half of every
/// release build (build scripts, proc macros) and cost the next image
/// build a full compile.
pub(crate) fn assets_dir() -> PathBuf {
    cmd::target_dir().join("dist")
}

/// Writes the release's files: each provider's SBOM, the chart package,
/// IMAGES (reference@digest of every image pushed) and SHA256SUMS.
fn assets(options: &Options) -> anyhow::Result<()> {
    let dir = assets_dir();
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut images = String::new();
    for provider in options.providers() {
        let built = cmd::target_dir().join("images").join(&provider);
        for platform in crate::image::platform::distinct(&options.platform) {
            let sbom = format!(
                "{}-{}-{}.sbom.cdx.json",
                package(&provider),
                env!("CARGO_PKG_VERSION"),
                platform.dir_name()
            );
            copy(
                &built
                    .join(platform.dir_name())
                    .join(crate::image::SBOM_FILE_NAME),
                &dir.join(sbom),
            )?;
        }
        let digest = index_digest(&built.join("oci"))?;
        images.push_str(&format!(
            "{}@{digest}\n",
            image_reference(&options.registry, &provider)
        ));
    }
    std::fs::write(dir.join("IMAGES"), images)?;
    let chart = crate::chart::publish::package_path()?;
    copy(
        &chart,
        &dir.join(chart.file_name().context("a package file name")?),
    )?;
    let sums = checksums(&dir)?;
    std::fs::write(dir.join("SHA256SUMS"), sums)?;
    Ok(())
}

fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to)
        .map(drop)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))
}

/// The digest of the image index an image layout's `index.json` lists
/// first (the image; each platform's manifest and SBOM follow).
pub(crate) fn index_digest(layout: &Path) -> anyhow::Result<String> {
    let listed = listed(layout)?;
    let digest = listed["manifests"][0]["digest"].as_str();
    ensure!(
        digest.is_some_and(|d| d.starts_with("sha256:")),
        "{}/index.json lists no manifest",
        layout.display()
    );
    Ok(digest.unwrap_or_default().to_owned())
}

/// Each SBOM artifact manifest in an image layout, by the digest of the
/// platform image it refers to: `(image, sbom)`.
pub(crate) fn sbom_digests(layout: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let listed = listed(layout)?;
    let mut found = Vec::new();
    for entry in listed["manifests"].as_array().into_iter().flatten() {
        if entry["artifactType"] != crate::image::SBOM_MEDIA_TYPE {
            continue;
        }
        let digest = entry["digest"].as_str().unwrap_or_default();
        let blob = layout
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"));
        let artifact: serde_json::Value = serde_json::from_slice(
            &std::fs::read(&blob).with_context(|| format!("reading {}", blob.display()))?,
        )?;
        let subject = artifact["subject"]["digest"].as_str().unwrap_or_default();
        found.push((subject.to_owned(), digest.to_owned()));
    }
    Ok(found)
}

fn listed(layout: &Path) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::from_slice(
        &std::fs::read(layout.join("index.json"))
            .with_context(|| format!("reading {}/index.json", layout.display()))?,
    )?)
}

/// `sha256sum`'s format over every file in `dir`, by name.
fn checksums(dir: &Path) -> anyhow::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "SHA256SUMS")
        .collect();
    names.sort();
    let mut out = String::new();
    for name in names {
        let bytes = std::fs::read(dir.join(&name))?;
        out.push_str(&format!("{}  {name}\n", sha256_hex(&bytes)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Options {
        match crate::parse_task(&[&["release"], args].concat()).unwrap() {
            crate::Task::Release(options) => options,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_release_files_stay_out_of_cargos_profile_directories() {
        let dir = assets_dir();
        for profile in ["debug", "release"] {
            assert!(
                !cmd::target_dir().join(profile).starts_with(&dir)
                    && !dir.starts_with(cmd::target_dir().join(profile)),
                "{} would clear or be cleared with cargo's {profile} profile",
                dir.display()
            );
        }
    }

    #[test]
    fn the_plan_pushes_each_image_then_its_sbom_then_the_chart() {
        let providers = vec!["aws".to_owned(), "fake".to_owned()];
        let steps = plan(&options(&["--dry-run"]), &providers);
        let shown: Vec<String> = steps.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 3 * 2 + 2, "{shown:#?}");
        assert_eq!(
            shown[0],
            "cargo xtask image --provider aws --platform linux/amd64,linux/arm64 --check --no-rebuild"
        );
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            shown[1].starts_with("skopeo copy --all oci:")
                && shown[1].ends_with(&format!(
                    "/images/aws/oci:{version} docker://ghcr.io/rust-ccm/aws-cloud-controller-manager:{version}"
                )),
            "{}",
            shown[1]
        );
        assert!(
            shown[2].starts_with("oras cp --recursive --from-oci-layout ")
                && shown[2].ends_with(&format!(
                    " ghcr.io/rust-ccm/aws-cloud-controller-manager:{version}"
                )),
            "{}",
            shown[2]
        );
        assert_eq!(
            shown[6],
            "cargo xtask chart --static --push oci://ghcr.io/rust-ccm/charts"
        );
        assert_eq!(steps[7], Step::Assets);
        for step in &steps {
            if let Step::Task(args) = step {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                crate::parse_task(&args).unwrap();
            }
        }
    }

    #[test]
    fn providers_and_platforms_narrow_the_release() {
        let narrowed = options(&[
            "--provider",
            "fake",
            "--platform",
            "linux/arm64,linux/amd64",
        ]);
        assert_eq!(narrowed.providers(), vec!["fake".to_owned()]);
        assert_eq!(narrowed.platforms(), "linux/amd64,linux/arm64");
        let amd64 = options(&["--platform=linux/amd64", "--loopback"]);
        assert_eq!(amd64.platforms(), "linux/amd64");
        assert_eq!(amd64.providers(), crate::image::providers());
        let steps = plan(&amd64, &amd64.providers());
        assert!(
            steps[0]
                .to_string()
                .contains("--platform linux/amd64 --check"),
            "{}",
            steps[0]
        );
        assert!(
            crate::parse_task(&["release", "--provider", "gcp"]).is_err(),
            "an unknown provider is refused"
        );
    }

    #[test]
    fn a_plain_http_registry_is_named_to_every_tool() {
        let steps = plan(
            &options(&["--registry", "127.0.0.1:5000/ccm", "--plain-http"]),
            &["fake".to_owned()],
        );
        let shown: Vec<String> = steps.iter().map(ToString::to_string).collect();
        assert!(shown[1].contains("--dest-tls-verify=false"), "{}", shown[1]);
        assert!(shown[2].contains("--to-plain-http"), "{}", shown[2]);
        assert!(
            shown[3].ends_with("--push oci://127.0.0.1:5000/ccm/charts --plain-http"),
            "{}",
            shown[3]
        );
    }

    #[test]
    fn checksums_are_in_sha256sums_format() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b"), b"abc").unwrap();
        std::fs::write(dir.path().join("a"), b"").unwrap();
        std::fs::write(dir.path().join("SHA256SUMS"), b"old").unwrap();
        assert_eq!(
            checksums(dir.path()).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a\n\
             ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  b\n"
        );
    }
}
