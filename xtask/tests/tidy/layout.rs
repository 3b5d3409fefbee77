//! Tidy's rules over where crates sit and what they are called: one name
//! per crate, and a product that never ships its proving ground.
//!
//! - A crate's package is named after its directory: `crates/x` and
//!   `testing/x` are `ccm-x`, `providers/x` is `ccm-provider-x`, a binary
//!   `cmd/x` is `x`. Its library keeps the package's name (no `[lib] name`),
//!   and the root declares it under that name (no `package =` rename), so
//!   code says what `cargo -p` says: `ccm-cloud-provider` is
//!   `ccm_cloud_provider::`.
//! - A product crate (`crates/`, `providers/`, `cmd/`) reaches a crate of
//!   `testing/` only as a dev-dependency or an optional dependency (a
//!   provider's `test-util` emulator), never in what it ships by default.
//! - A crate has at most one integration test executable (`tests/x.rs` or
//!   `tests/x/main.rs`), its suites the modules: each executable links the
//!   whole crate and its dependencies again (CI linked 118, 7.4 GB).

use std::path::Path;

use super::crates;
use super::manifests::shipped_dependencies;

/// The package name the crate at `krate` (a member path) must carry.
fn expected_package(krate: &str) -> String {
    let (group, dir) = krate.rsplit_once('/').unwrap_or(("", krate));
    match group {
        "" => dir.to_owned(),
        "cmd" => dir.to_owned(),
        "providers" => format!("ccm-provider-{dir}"),
        _ => format!("ccm-{dir}"),
    }
}

/// The value of `key` in `table` of a manifest (a quoted string), if set.
fn table_value<'a>(manifest: &'a str, table: &str, key: &str) -> Option<&'a str> {
    let mut current = "";
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            current = line;
            continue;
        }
        if current != table {
            continue;
        }
        let Some((k, value)) = line.split_once('=') else {
            continue;
        };
        if k.trim() == key {
            return Some(value.trim().trim_matches('"'));
        }
    }
    None
}

/// Where a crate's name breaks the rule: its package, a renamed library, a
/// workspace dependency declared under another name.
pub(super) fn crate_names(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in crates(root) {
        let manifest =
            std::fs::read_to_string(root.join(&krate).join("Cargo.toml")).unwrap_or_default();
        let expected = expected_package(&krate);
        let package = table_value(&manifest, "[package]", "name").unwrap_or_default();
        if package != expected {
            found.push(format!(
                "{krate}/Cargo.toml names its package `{package}`: it is `{expected}`"
            ));
        }
        if let Some(lib) = table_value(&manifest, "[lib]", "name") {
            found.push(format!(
                "{krate}/Cargo.toml names its library `{lib}`: code says the package's name"
            ));
        }
    }
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    for line in workspace.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if value.contains("path =") && value.contains("package =") {
            found.push(format!(
                "Cargo.toml declares `{}` under another name: the key is the package's name",
                key.trim()
            ));
        }
    }
    found
}

/// Where a product crate ships a crate of `testing/`: a dependency outside
/// its dev-dependencies that is not optional.
pub(super) fn proving_ground_shipped(root: &Path) -> Vec<String> {
    let testing: Vec<String> = crates(root)
        .into_iter()
        .filter(|krate| krate.starts_with("testing/"))
        .map(|krate| expected_package(&krate))
        .collect();
    let mut found = Vec::new();
    for krate in crates(root) {
        if !["crates/", "providers/", "cmd/"]
            .iter()
            .any(|group| krate.starts_with(group))
        {
            continue;
        }
        let manifest =
            std::fs::read_to_string(root.join(&krate).join("Cargo.toml")).unwrap_or_default();
        for name in shipped_dependencies(&manifest) {
            if !testing.iter().any(|t| t == name) {
                continue;
            }
            let optional = manifest.lines().any(|line| {
                line.split_once('=').is_some_and(|(key, value)| {
                    key.trim() == name && value.contains("optional = true")
                })
            });
            if !optional {
                found.push(format!(
                    "{krate}/Cargo.toml ships `{name}`: the proving ground is a dev-dependency \
                     (or an optional test-util one)"
                ));
            }
        }
    }
    found
}

/// Crates with more than one integration test executable: cargo makes one
/// of each `tests/x.rs` and each `tests/x/main.rs`.
pub(super) fn test_executables(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in crates(root) {
        let Ok(entries) = std::fs::read_dir(root.join(&krate).join("tests")) else {
            continue;
        };
        let mut targets: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs") || p.join("main.rs").is_file())
            .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
            .collect();
        targets.sort();
        if targets.len() > 1 {
            found.push(format!(
                "{krate}/tests has {} test executables ({}): one, its suites the modules",
                targets.len(),
                targets.join(", ")
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::super::write_file;
    use super::*;

    const WORKSPACE: &str = "[workspace]\nmembers = [\"crates/*\", \"testing/*\", \"providers/*\", \"cmd/*\"]\n\
                             [workspace.dependencies]\nccm-app = { path = \"crates/app\" }\n";

    fn package(name: &str) -> String {
        format!("[package]\nname = \"{name}\"\n")
    }

    #[test]
    fn a_crate_not_named_by_the_rule_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path();
        let write = |path: &str, text: &str| write_file(root, path, text);
        write("Cargo.toml", WORKSPACE);
        write("crates/app/Cargo.toml", &package("ccm-app"));
        write("testing/chaos/Cargo.toml", &package("ccm-chaos"));
        write("providers/acme/Cargo.toml", &package("ccm-provider-acme"));
        write("cmd/acme-ccm/Cargo.toml", &package("acme-ccm"));
        assert!(crate_names(root).is_empty(), "{:?}", crate_names(root));
        write(
            "providers/acme/Cargo.toml",
            "[package]\nname = \"ccm-provider-acme\"\n[lib]\nname = \"acme\"\n",
        );
        write("testing/chaos/Cargo.toml", &package("chaos"));
        write(
            "Cargo.toml",
            &format!("{WORKSPACE}app = {{ package = \"ccm-app\", path = \"crates/app\" }}\n"),
        );
        assert_eq!(
            crate_names(root),
            [
                "providers/acme/Cargo.toml names its library `acme`: code says the package's name",
                "testing/chaos/Cargo.toml names its package `chaos`: it is `ccm-chaos`",
                "Cargo.toml declares `app` under another name: the key is the package's name",
            ]
        );
    }

    #[test]
    fn a_product_crate_shipping_the_proving_ground_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path();
        let write = |path: &str, text: &str| write_file(root, path, text);
        write("Cargo.toml", WORKSPACE);
        write("testing/test-support/Cargo.toml", "");
        write(
            "providers/acme/Cargo.toml",
            "[dependencies]\nccm-test-support = { workspace = true, optional = true }\n\
             [dev-dependencies]\nccm-test-support.workspace = true\n",
        );
        write(
            "testing/chaos/Cargo.toml",
            "[dependencies]\nccm-test-support.workspace = true\n",
        );
        assert!(
            proving_ground_shipped(root).is_empty(),
            "{:?}",
            proving_ground_shipped(root)
        );
        write(
            "crates/app/Cargo.toml",
            "[dependencies]\nccm-test-support.workspace = true\n",
        );
        assert_eq!(
            proving_ground_shipped(root),
            [
                "crates/app/Cargo.toml ships `ccm-test-support`: the proving ground is a \
              dev-dependency (or an optional test-util one)"
            ]
        );
    }

    #[test]
    fn a_second_test_executable_in_a_crate_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path();
        let write = |path: &str, text: &str| write_file(root, path, text);
        write("Cargo.toml", WORKSPACE);
        write("crates/app/Cargo.toml", "");
        write("crates/app/tests/integration/main.rs", "");
        write("crates/app/tests/integration/watches.rs", "");
        write("crates/app/tests/openapi/spec.yaml", "");
        assert!(
            test_executables(root).is_empty(),
            "{:?}",
            test_executables(root)
        );
        write("crates/app/tests/extra.rs", "");
        write("crates/app/tests/suite/main.rs", "");
        assert_eq!(
            test_executables(root),
            [
                "crates/app/tests has 3 test executables (extra, integration, suite): one, \
                 its suites the modules"
            ]
        );
    }
}
