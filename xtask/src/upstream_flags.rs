//! `cargo xtask upstream-flags`: regenerates the flags and feature gates
//! upstream's binaries accept, from upstream's own Go source
//! (`upstream_flags/main.go`, built in a throw-away module per release):
//! `crates/app/upstream-flags.json` for `k8s.io/cloud-provider`'s
//! `cloud-controller-manager`, and
//! `cmd/aws-cloud-controller-manager/tests/upstream-flags.json` for
//! cloud-provider-aws's `aws-cloud-controller-manager` (the same program with
//! `upstream_flags/aws.go`, over the k8s.io modules that release builds
//! with). ccm-app's tests, and the AWS binary's, then fail if any of those
//! flags or gates is refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use clap::Args;
use serde_json::{Value, json};

use crate::cmd::{repo_root, run};

/// The generator.
const MAIN_GO: &str = include_str!("upstream_flags/main.go");

/// What cloud-provider-aws's main adds to the command, for the generator
/// built with `-tags aws`.
const AWS_GO: &str = include_str!("upstream_flags/aws.go");

/// cloud-provider-aws's module.
const AWS_MODULE: &str = "k8s.io/cloud-provider-aws";

/// Its binary's main package, which `aws.go` mirrors.
const AWS_COMMAND: &str = "k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager";

/// The lines of that main.go that shape the command (those containing one
/// of [`AWS_MAIN_MARKERS`]), as `aws.go` mirrors them: a new release whose
/// main.go reads otherwise must be read, and `aws.go` brought up to it.
const AWS_MAIN_MIRRORED: [&str; 7] = [
    "controllerInitializers := app.DefaultInitFuncConstructors",
    "taggingControllerWrapper.Options.AddFlags(fss.FlagSet(\"tagging controller\"))",
    "controllerInitializers[tagging.TaggingControllerKey] = taggingControllerConstructor",
    "app.ControllersDisabledByDefault.Insert(tagging.TaggingControllerKey)",
    "controllerAliases := names.CCMControllerAliases()",
    "controllerAliases[tagging.TaggingControllerKey] = tagging.TaggingControllerKey",
    "command := app.NewCloudControllerManagerCommand(opts, cloudInitializer, controllerInitializers, controllerAliases, fss, wait.NeverStop)",
];

/// What marks a line of that main.go as shaping the command.
const AWS_MAIN_MARKERS: [&str; 8] = [
    "FlagSet(",
    "AddFlags(",
    "ControllersDisabledByDefault",
    "Aliases",
    "Initializers",
    "FeatureGate",
    "pflag",
    "NewCloudControllerManagerCommand",
];

/// Imports through which a package can add flags or feature gates to the
/// command. (Go's own `flag` is not one: cobra adds only pflag's
/// `CommandLine`, and copying Go's flags there takes pflag.)
const REGISTRARS: [&str; 5] = [
    "github.com/spf13/pflag",
    "github.com/spf13/cobra",
    "k8s.io/component-base/cli/flag",
    "k8s.io/component-base/featuregate",
    "k8s.io/apiserver/pkg/util/feature",
];

/// Regenerates the upstream flag lists from upstream's Go source (needs Go).
#[derive(Debug, Args)]
pub(crate) struct Options {
    /// `k8s.io/cloud-provider` releases to cover, oldest first: one per
    /// supported Kubernetes minor (each is built in a build cache of its
    /// own, removed after: several minutes on two cores).
    #[arg(long, value_delimiter = ',', default_value = "v0.35.4,v0.36.3,v0.37.2")]
    versions: Vec<String>,

    /// `k8s.io/cloud-provider-aws` releases to cover, oldest first (each
    /// builds the k8s.io modules its go.mod selects, as above).
    #[arg(long, value_delimiter = ',', default_value = "v1.35.3,v1.36.2,v1.37.1")]
    aws_versions: Vec<String>,
}

/// Whose command a run of the generator describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binary {
    /// `k8s.io/cloud-provider`'s own, at the named release.
    Generic,
    /// cloud-provider-aws's, at the named release.
    Aws,
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    let go = crate::tools::control_plane::go()?;
    let mut generic = Vec::new();
    for version in &options.versions {
        generic.push(generate(&go, Binary::Generic, version)?);
    }
    write(
        "crates/app/upstream-flags.json",
        "cargo xtask upstream-flags: options.NewCloudControllerManagerOptions().Flags(...) plus the global section (verflag, component-base logs with the JSON format registered, globalflag) and utilfeature.DefaultMutableFeatureGate, as k8s.io/cloud-provider's NewCloudControllerManagerCommand assembles them",
        &generic,
    )?;
    let mut aws = Vec::new();
    for version in &options.aws_versions {
        aws.push(generate(&go, Binary::Aws, version)?);
    }
    write(
        "cmd/aws-cloud-controller-manager/tests/upstream-flags.json",
        "cargo xtask upstream-flags: k8s.io/cloud-provider's command assembly (as for crates/app/upstream-flags.json) plus what cloud-provider-aws's cmd/aws-cloud-controller-manager/main.go adds (the tagging controller, off by default, and its `tagging controller` section), in a module requiring only that cloud-provider-aws release, so over the k8s.io modules its go.mod selects (`ccm_cloud_provider`); no other package the binary links imports a flag or feature-gate registry",
        &aws,
    )
}

fn write(path: &str, generated_by: &str, releases: &[Value]) -> anyhow::Result<()> {
    let document = json!({ "generated_by": generated_by, "releases": releases });
    let out = repo_root().join(path);
    std::fs::write(&out, serde_json::to_string_pretty(&document)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    println!("xtask: wrote {}", out.display());
    Ok(())
}

/// One release's flags and gates, gates sorted by name.
fn generate(go: &Path, binary: Binary, version: &str) -> anyhow::Result<Value> {
    let module = match binary {
        Binary::Generic => "k8s.io/cloud-provider",
        Binary::Aws => AWS_MODULE,
    };
    let scratch: PathBuf = std::env::temp_dir().join(format!(
        "rust-ccm-upstream-flags-{}-{version}",
        module.rsplit('/').next().unwrap_or(module)
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let release = generate_in(&scratch, go, binary, module, version);
    // The build cache too: a few GiB per release, and no two releases share much.
    let _ = std::fs::remove_dir_all(&scratch);
    release
}

fn generate_in(
    scratch: &Path,
    go: &Path,
    binary: Binary,
    module: &str,
    version: &str,
) -> anyhow::Result<Value> {
    std::fs::write(
        scratch.join("go.mod"),
        "module ccm.local/upstreamflags\n\ngo 1.24\n",
    )?;
    std::fs::write(scratch.join("main.go"), MAIN_GO)?;
    let go_cmd = || {
        let mut cmd = Command::new(go);
        cmd.current_dir(scratch)
            .env("GOFLAGS", "-mod=mod")
            // Go skips directories whose names start with a dot.
            .env("GOCACHE", scratch.join(".gocache"));
        cmd
    };
    let modules: Vec<String> = match binary {
        Binary::Generic => [
            "k8s.io/cloud-provider/app",
            "k8s.io/component-base",
            "k8s.io/apiserver",
        ]
        .iter()
        .map(|m| format!("{m}@{version}"))
        .collect(),
        // The k8s.io modules are the ones this release's go.mod selects;
        // its `replace` lines do not apply to a module that requires it.
        Binary::Aws => {
            std::fs::write(scratch.join("aws.go"), AWS_GO)?;
            vec![format!("{AWS_MODULE}@{version}")]
        }
    };
    run(go_cmd().arg("get").args(&modules))
        .with_context(|| format!("fetching {module} {version}"))?;
    run(go_cmd().args(["mod", "tidy"]))?;
    let tags: &[&str] = match binary {
        Binary::Generic => &[],
        Binary::Aws => {
            check_aws_main(&go_cmd)?;
            check_aws_registrars(&go_cmd)?;
            &["-tags", "aws"]
        }
    };
    let source = format!("{module} {version}");
    let output = go_cmd()
        .arg("run")
        .args(tags)
        .args([".", &source])
        .output()
        .context("running the generator")?;
    anyhow::ensure!(
        output.status.success(),
        "the generator failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut release: Value = serde_json::from_slice(&output.stdout)?;
    if let Some(gates) = release["feature_gates"].as_array_mut() {
        gates.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    if binary == Binary::Aws {
        let selected = go_output(&go_cmd, &["list", "-m", "k8s.io/cloud-provider"])?;
        release["cloud_provider"] = Value::String(selected.trim().to_owned());
    }
    Ok(release)
}

/// Fails unless cloud-provider-aws's main.go shapes the command as
/// `aws.go` mirrors, and its tagging controller's key is the one `aws.go`
/// names.
fn check_aws_main(go_cmd: &dyn Fn() -> Command) -> anyhow::Result<()> {
    let dir = go_output(go_cmd, &["list", "-m", "-f", "{{.Dir}}", AWS_MODULE])?;
    let dir = Path::new(dir.trim());
    let main = std::fs::read_to_string(dir.join("cmd/aws-cloud-controller-manager/main.go"))
        .context("reading cloud-provider-aws's main.go")?;
    let lines: Vec<&str> = main
        .lines()
        .map(str::trim)
        .filter(|l| AWS_MAIN_MARKERS.iter().any(|m| l.contains(m)))
        .collect();
    anyhow::ensure!(
        lines == AWS_MAIN_MIRRORED,
        "cloud-provider-aws's main.go no longer shapes the command as upstream_flags/aws.go \
         mirrors; bring aws.go and AWS_MAIN_MIRRORED up to:\n{}",
        lines.join("\n")
    );
    let tagging = std::fs::read_dir(dir.join("pkg/controllers/tagging"))?
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .any(|text| {
            text.lines()
                .any(|l| l.trim() == "TaggingControllerKey = \"tagging\"")
        });
    anyhow::ensure!(
        tagging,
        "cloud-provider-aws's TaggingControllerKey is no longer \"tagging\", as aws.go names it"
    );
    Ok(())
}

/// Fails if a package the AWS binary links, and the generator does not,
/// imports a flag or feature-gate registry ([`REGISTRARS`]): its flags or
/// gates would be missing from the data. Lists packages without compiling
/// them (the AWS SDK among them).
fn check_aws_registrars(go_cmd: &dyn Fn() -> Command) -> anyhow::Result<()> {
    let format = "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}";
    let binary = go_output(go_cmd, &["list", "-deps", "-f", format, AWS_COMMAND])?;
    let generator = go_output(
        go_cmd,
        &[
            "list",
            "-tags",
            "aws",
            "-deps",
            "-f",
            "{{.ImportPath}}",
            ".",
        ],
    )?;
    let covered: BTreeSet<&str> = generator.lines().collect();
    let uncovered: Vec<&str> = binary
        .lines()
        .filter(|line| {
            let mut words = line.split(' ');
            let package = words.next().unwrap_or_default();
            package != AWS_COMMAND
                && !covered.contains(package)
                && words.any(|import| REGISTRARS.contains(&import))
        })
        .collect();
    anyhow::ensure!(
        uncovered.is_empty(),
        "packages aws-cloud-controller-manager links may register flags or feature gates \
         the generator does not see; import them in upstream_flags/aws.go:\n{}",
        uncovered.join("\n")
    );
    Ok(())
}

fn go_output(go_cmd: &dyn Fn() -> Command, args: &[&str]) -> anyhow::Result<String> {
    let output = go_cmd()
        .args(args)
        .output()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    anyhow::ensure!(
        output.status.success(),
        "go {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}
