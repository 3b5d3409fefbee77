//! Tidy's rules over the crates' manifests: what a crate may add to its
//! external dependencies, and which crates may have a Kubernetes client.

use std::path::Path;

use super::{crate_dirs, crates, write_file};

/// The features a crate's manifest may add to an external crate, and why
/// the root does not carry them: (crate, dependency, reason).
const FEATURE_EXCEPTIONS: [(&str, &str, &str); 4] = [
    (
        "testing/test-apiserver",
        "k8s-openapi",
        "`schemars`, for the test API server's OpenAPI document: kept out of the binaries",
    ),
    (
        "providers/aws",
        "aws-sdk-ec2",
        "`test-util`, a dev-dependency: the SDK's test helpers stay out of the binary",
    ),
    (
        "providers/aws",
        "aws-sdk-elasticloadbalancing",
        "`test-util`, as for aws-sdk-ec2",
    ),
    (
        "providers/aws",
        "aws-sdk-elasticloadbalancingv2",
        "`test-util`, as for aws-sdk-ec2",
    ),
];

/// The dependency a manifest line declares with `features = [...]`.
fn featured_dependency(line: &str) -> Option<&str> {
    let (key, value) = line.split_once('=')?;
    let key = key.trim();
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    (plain && value.contains("features")).then_some(key)
}

/// Manifest lines that add features to an external crate (one the root's
/// `[workspace.dependencies]` does not give a `path`), outside
/// [`FEATURE_EXCEPTIONS`].
pub(super) fn added_features(root: &Path) -> Vec<String> {
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let internal = |name: &str| {
        workspace
            .lines()
            .filter_map(|line| line.split_once('='))
            .any(|(key, value)| key.trim() == name && value.contains("path ="))
    };
    let mut found = Vec::new();
    for krate in crates(root) {
        let manifest =
            std::fs::read_to_string(root.join(&krate).join("Cargo.toml")).unwrap_or_default();
        for name in manifest.lines().filter_map(featured_dependency) {
            let excepted = FEATURE_EXCEPTIONS
                .iter()
                .any(|(c, d, _)| *c == krate && *d == name);
            if !internal(name) && !excepted {
                found.push(format!(
                    "{krate}/Cargo.toml adds features to `{name}`: pin them in the root Cargo.toml"
                ));
            }
        }
    }
    found
}

/// The crates that must not talk to the Kubernetes API: the interface
/// crate, and every provider (it gets what it needs as arguments and
/// returns what it wants recorded).
fn without_kubernetes_client(root: &Path) -> Vec<String> {
    let providers = crate_dirs(&root.join("providers"));
    let providers = providers.into_iter().map(|dir| format!("providers/{dir}"));
    std::iter::once("crates/cloud-provider".to_owned())
        .chain(providers)
        .collect()
}

/// The dependencies a manifest declares outside its dev-dependencies: keys
/// of a `[dependencies]`, `[build-dependencies]` or
/// `[target.'...'.dependencies]` table, and `[dependencies.<name>]` tables.
pub(super) fn shipped_dependencies(manifest: &str) -> Vec<&str> {
    let mut table = "";
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']');
            if let Some((before, name)) = table.split_once("dependencies.")
                && !before.ends_with("dev-")
            {
                found.push(name);
            }
            continue;
        }
        if !table.ends_with("dependencies") || table.ends_with("dev-dependencies") {
            continue;
        }
        let key = line.split_once('=').map(|(key, _)| key.trim());
        let name = key.and_then(|key| key.split('.').next());
        if let Some(name) = name.filter(|n| !n.is_empty() && !n.starts_with('#')) {
            found.push(name);
        }
    }
    found
}

/// Where the interface crate or a provider depends on a Kubernetes client
/// (`kube` or a `kube-*` crate) outside its dev-dependencies.
pub(super) fn kubernetes_clients(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for krate in without_kubernetes_client(root) {
        let manifest =
            std::fs::read_to_string(root.join(&krate).join("Cargo.toml")).unwrap_or_default();
        for name in shipped_dependencies(&manifest) {
            if name == "kube" || name.starts_with("kube-") {
                found.push(format!(
                    "{krate}/Cargo.toml depends on `{name}`: only the framework talks to the Kubernetes API"
                ));
            }
        }
    }
    found
}

#[test]
fn a_crate_adding_features_to_an_external_crate_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let write = |path: &str, text: &str| write_file(root, path, text);
    write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/*\"]\n[workspace.dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\nwidget-core = { path = \"crates/widget-core\" }\n",
    );
    write(
        "crates/widget/Cargo.toml",
        "[features]\ntest-util = []\n[dependencies]\nserde.workspace = true\nwidget-core = { workspace = true, features = [\"test-util\"] }\n",
    );
    assert!(
        added_features(root).is_empty(),
        "{:?}",
        added_features(root)
    );
    write(
        "crates/widget/Cargo.toml",
        "[dependencies]\nserde = { workspace = true, features = [\"rc\"] }\n",
    );
    assert_eq!(
        added_features(root),
        ["crates/widget/Cargo.toml adds features to `serde`: pin them in the root Cargo.toml"]
    );
}

#[test]
fn a_kubernetes_client_in_the_interface_or_a_provider_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let write = |path: &str, text: &str| write_file(root, path, text);
    write(
        "crates/cloud-provider/Cargo.toml",
        "[dependencies]\nk8s-openapi.workspace = true\n[dev-dependencies]\nkube.workspace = true\n",
    );
    write(
        "providers/acme/Cargo.toml",
        "[features]\nkube = []\n[dependencies]\nreqwest.workspace = true\n",
    );
    write(
        "crates/runtime/Cargo.toml",
        "[dependencies]\nkube.workspace = true\n",
    );
    assert!(
        kubernetes_clients(root).is_empty(),
        "{:?}",
        kubernetes_clients(root)
    );
    write(
        "crates/cloud-provider/Cargo.toml",
        "[dependencies]\nkube-runtime = { workspace = true }\n",
    );
    write(
        "providers/acme/Cargo.toml",
        "[dependencies.kube]\nworkspace = true\n[target.'cfg(unix)'.dependencies]\nkube-client.workspace = true\n",
    );
    assert_eq!(
        kubernetes_clients(root),
        [
            "crates/cloud-provider/Cargo.toml depends on `kube-runtime`: only the framework talks to the Kubernetes API",
            "providers/acme/Cargo.toml depends on `kube`: only the framework talks to the Kubernetes API",
            "providers/acme/Cargo.toml depends on `kube-client`: only the framework talks to the Kubernetes API",
        ]
    );
}
