//! `cargo xtask new-provider NAME`: everything a new cloud needs, generated
//! in one step from `xtask/templates/new-provider/`, so that the workspace
//! builds, clippy is clean and the new provider's tests (the conformance
//! suite against its in-memory cloud) pass right after.

mod check;
mod edits;
mod render;

use std::path::Path;

use anyhow::Context;

pub(crate) use check::check;
use render::{Capability, Names};

/// Generates a new provider NAME: providers/NAME (the cloud-provider
/// interface over an `Api` trait of cloud calls, whose HTTP bodies answer
/// `NotImplemented` until written; its TOML cloud config and factory; an
/// in-memory cloud and the conformance suite against it),
/// cmd/NAME-cloud-controller-manager (thin, feature-selected), the chart's
/// ci/NAME-values.yaml and its provider enum, docs/providers/NAME.md, the
/// workspace dependency and the ARCHITECTURE.md code-map section.
/// `cargo xtask image --provider NAME` works at once.
///
/// NAME is lower-case letters and digits, words joined by `-`, and must not
/// exist yet. Exits 64 with one line otherwise.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// The cloud's name: --cloud-provider, the crate and the binary.
    #[arg(required_unless_present = "check")]
    name: Option<String>,
    /// Instead of generating into this workspace: generate three providers
    /// into a copy of it and build, lint and test them (what `cargo xtask
    /// ci` runs).
    #[arg(long, conflicts_with_all = ["name", "capabilities"])]
    check: bool,
    /// What the provider offers (routes need instances).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "instances,load-balancers,routes"
    )]
    capabilities: Vec<Capability>,
}

/// A NAME or capability set the generator refuses: exit 64, one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub(crate) String);

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    let Some(name) = options.name.as_deref().filter(|_| !options.check) else {
        return check();
    };
    let root = crate::cmd::repo_root();
    let written = generate(&root, name, &options.capabilities)?;
    format(&root, name);
    println!("generated provider `{name}`:");
    for path in &written {
        println!("  {path}");
    }
    println!(
        "\nnext: cargo build -p {0}-cloud-controller-manager && cargo test -p ccm-provider-{0}\n\
         then fill in providers/{0}/src/api.rs (docs/adding-a-provider.md)",
        name
    );
    Ok(())
}

/// Writes provider `name` into the workspace at `root`; the paths written
/// and edited, relative to `root`.
pub(crate) fn generate(
    root: &Path,
    name: &str,
    capabilities: &[Capability],
) -> anyhow::Result<Vec<String>> {
    let names = Names::new(name)?;
    let capabilities = render::capabilities(capabilities)?;
    edits::refuse_existing(root, &names)?;
    let mut written = Vec::new();
    for (path, text) in render::files(&names, &capabilities) {
        let target = root.join(&path);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
        written.push(path);
    }
    written.extend(edits::apply(root, &names, &capabilities)?);
    Ok(written)
}

/// rustfmt over the generated crates, so they read like the rest; a
/// missing rustfmt only costs the formatting.
fn format(root: &Path, name: &str) {
    let status = crate::cmd::cargo()
        .current_dir(root)
        .args(["fmt", "-p", &format!("ccm-provider-{name}")])
        .args(["-p", &format!("{name}-cloud-controller-manager")])
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("note: `cargo fmt` did not run; the generated code is unformatted");
    }
}
