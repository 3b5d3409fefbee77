//! `cargo xtask ci`: everything CI checks, in the order that fails fastest.

use crate::cmd::{cargo, run};
use crate::tools;

pub(crate) fn main(args: &[String]) -> anyhow::Result<()> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: cargo xtask ci\n\n\
             Installs missing tools, then runs: cargo fmt --check, clippy (warnings denied),\n\
             rustdoc of the interface crate (warnings denied), every test in the workspace,\n\
             `cargo xtask sandbox --check`, `cargo xtask chart`, and\n\
             `cargo xtask image --check` for each provider's image."
        );
        return Ok(());
    }
    tools::ensure_all()?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--locked",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo()
        .args(["doc", "--no-deps", "--locked", "-p", "cloud-provider"])
        .env("RUSTDOCFLAGS", "-D warnings"))?;
    run(cargo().args(["test", "--workspace", "--locked"]))?;
    // The README's first command, as a newcomer runs it: the real binaries
    // must bring a small cluster all the way up.
    crate::sandbox::main(&["--check".to_owned()])?;
    // The Helm chart: lint, strict schemas, and its RBAC against the
    // requests a real CCM sends.
    crate::chart::main(&[])?;
    // Each provider's image: built once, rebuilt and compared byte for byte,
    // read by skopeo and umoci, and held to the size limit.
    for provider in crate::image::PROVIDERS {
        crate::image::main(&[
            "--provider".to_owned(),
            (*provider).to_owned(),
            "--check".to_owned(),
        ])?;
    }
    println!("\nxtask ci: all checks passed");
    Ok(())
}
