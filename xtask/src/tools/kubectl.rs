//! kubectl for the tests and the sandbox: the one on `PATH` when it is 1.27
//! or newer (from then on kubectl finds server-side field validation in the
//! OpenAPI v3 documents, which test-apiserver serves, so `kubectl apply`
//! needs no `--validate=false`). Otherwise, on a machine without one or with
//! Debian bookworm's 1.20, kubectl at the control plane's version, built
//! from the Go modules and cached outside the clone; tests are pointed at it
//! with `KUBECTL` ([`point_at`]).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The oldest kubectl minor version that validates through OpenAPI v3.
const MIN_MINOR: u32 = 27;

/// The kubectl chosen by [`ensure`]: `None` while it is the one on `PATH`.
static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The minor version of the kubectl on `PATH`, if there is one.
fn path_minor() -> Option<u32> {
    let out = Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let version: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    minor_of(version["clientVersion"]["minor"].as_str()?)
}

/// `32` from `"32"` or `"32+"`.
fn minor_of(minor: &str) -> Option<u32> {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Makes sure a kubectl of 1.27 or newer is at hand; builds one when the
/// one on `PATH` is missing or older.
pub(crate) fn ensure() -> anyhow::Result<()> {
    if BUILT.get().is_some() {
        return Ok(());
    }
    let built = match path_minor() {
        Some(minor) if minor >= MIN_MINOR => None,
        found => {
            println!(
                "xtask: kubectl on PATH is {}; building kubectl {} from the Go modules",
                found.map_or("missing".to_owned(), |m| format!(
                    "1.{m}, older than 1.{MIN_MINOR}"
                )),
                super::control_plane::NEWEST.kubernetes
            );
            Some(super::control_plane::kubectl()?)
        }
    };
    let _ = BUILT.set(built);
    Ok(())
}

/// The kubectl to run: the built one, or `kubectl` from `PATH`.
pub(crate) fn program() -> PathBuf {
    BUILT
        .get()
        .cloned()
        .flatten()
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// Points `command` (a test run) at the built kubectl, when one was built.
pub(crate) fn point_at(command: &mut Command) -> &mut Command {
    if let Some(Some(built)) = BUILT.get() {
        command.env("KUBECTL", built);
    }
    command
}

#[cfg(test)]
mod tests {
    use super::minor_of;

    #[test]
    fn minor_versions_are_read_with_or_without_a_plus() {
        assert_eq!(minor_of("32"), Some(32));
        assert_eq!(minor_of("20+"), Some(20));
        assert_eq!(minor_of(""), None);
    }
}
