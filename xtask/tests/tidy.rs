//! Tidy: what the compiler does not check but this repository promises.
//!
//! - ARCHITECTURE.md's code map has a section for every crate, and names
//!   every one of the crate's top-level modules (`src/<module>.rs`) in it.
//! - No Rust file passes 600 lines.
//! - Every Rust file (module, test or bench) opens with a `//!` comment.
//! - The product's crates (the framework a provider binary is built from)
//!   name no cloud: no provider crate among their dependencies, none in
//!   their code outside its tests.
//! - A crate's manifest adds features to no external crate (the root
//!   `Cargo.toml` pins each with the union of what any crate needs), but for
//!   the exceptions [`FEATURE_EXCEPTIONS`] lists with their reasons.
//!
//! Each rule is a function over a directory, so its own test can break it
//! on purpose in a temporary tree.

use std::path::{Path, PathBuf};

/// The most lines a Rust file may have.
const MAX_LINES: usize = 600;

/// The workspace root (xtask's parent).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, but for build output and dependencies.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !matches!(name.as_ref(), "target" | "node_modules" | ".git") {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The workspace's crates, as paths relative to `root`: every directory
/// under `crates/`, `providers/` and `cmd/` with a Cargo.toml, and `xtask`.
fn crates(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for group in ["crates", "providers", "cmd"] {
        let Ok(entries) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.path().join("Cargo.toml").is_file() {
                found.push(format!("{group}/{}", entry.file_name().to_string_lossy()));
            }
        }
    }
    if root.join("xtask/Cargo.toml").is_file() {
        found.push("xtask".to_owned());
    }
    found.sort();
    found
}

/// The code-map section of `architecture` about crate `krate`: from its
/// `### ` heading (the crate's path, or a `cmd/*-...` pattern matching
/// it, in backticks) to the next heading.
fn section<'a>(architecture: &'a str, krate: &str) -> Option<&'a str> {
    let mut start = None;
    let mut offset = 0;
    for line in architecture.split_inclusive('\n') {
        if line.starts_with("#") {
            if let Some(begin) = start {
                return Some(&architecture[begin..offset]);
            }
            if line.starts_with("### ") && heading_names(line, krate) {
                start = Some(offset);
            }
        }
        offset += line.len();
    }
    start.map(|begin| &architecture[begin..])
}

/// Whether the heading `line` names `krate`: `` `crates/x` `` exactly, or a
/// pattern with one `*`.
fn heading_names(line: &str, krate: &str) -> bool {
    let Some(named) = line.split('`').nth(1) else {
        return false;
    };
    match named.split_once('*') {
        Some((prefix, suffix)) => {
            krate.len() > prefix.len() + suffix.len()
                && krate.starts_with(prefix)
                && krate.ends_with(suffix)
        }
        None => named == krate,
    }
}

/// What ARCHITECTURE.md fails to say: crates without a section and
/// top-level modules their section does not name (as `` `module` `` or
/// `` `module.rs` ``).
fn code_map_gaps(root: &Path) -> Vec<String> {
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    let mut gaps = Vec::new();
    for krate in crates(root) {
        let Some(text) = section(&architecture, &krate) else {
            gaps.push(format!("ARCHITECTURE.md has no `### `{krate}`` section"));
            continue;
        };
        let Ok(entries) = std::fs::read_dir(root.join(&krate).join("src")) else {
            continue;
        };
        let mut modules: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".rs").map(str::to_owned)
            })
            .filter(|m| !matches!(m.as_str(), "lib" | "main"))
            .collect();
        modules.sort();
        for module in modules {
            let named =
                text.contains(&format!("`{module}`")) || text.contains(&format!("`{module}.rs`"));
            if !named {
                gaps.push(format!(
                    "ARCHITECTURE.md's `{krate}` section does not name its module `{module}`"
                ));
            }
        }
    }
    gaps
}

/// Rust files over [`MAX_LINES`] lines, with their length.
fn long_files(root: &Path) -> Vec<String> {
    rust_files(root)
        .into_iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(&path).ok()?.lines().count();
            (lines > MAX_LINES).then(|| {
                format!(
                    "{} has {lines} lines (at most {MAX_LINES})",
                    relative(root, &path)
                )
            })
        })
        .collect()
}

/// Rust files that do not open with a `//!` comment.
fn undocumented_modules(root: &Path) -> Vec<String> {
    rust_files(root)
        .into_iter()
        .filter(|path| {
            std::fs::read_to_string(path)
                .map(|text| !text.trim_start().starts_with("//!"))
                .unwrap_or(true)
        })
        .map(|path| {
            format!(
                "{} does not open with a `//!` comment",
                relative(root, &path)
            )
        })
        .collect()
}

/// The framework's crates: what every provider binary is built from besides
/// its provider.
const PRODUCT: [&str; 5] = [
    "crates/app",
    "crates/runtime",
    "crates/controllers",
    "crates/cloud-provider",
    "crates/leader-election",
];

/// Each provider under `providers/` as its package and library names say
/// it: `provider-<dir>` and `provider_<dir>`.
fn provider_names(root: &Path) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(root.join("providers")) else {
        return Vec::new();
    };
    let mut names: Vec<_> = entries
        .flatten()
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| {
            let dir = entry.file_name().to_string_lossy().into_owned();
            (
                format!("provider-{dir}"),
                format!("provider_{}", dir.replace('-', "_")),
            )
        })
        .collect();
    names.sort();
    names
}

/// Whether `path` holds only tests: a `tests.rs`, a `*_tests.rs`, or a file
/// under a `tests` directory.
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// Whether `code` holds `word` at the start of an identifier (so
/// `cloudprovider_aws_` in a metric's name is not `provider_aws`).
fn names(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Where a product crate names a provider: a provider package among its
/// non-dev dependencies, or a provider library in its code before the
/// file's first `#[cfg(test)]`.
fn clouds_named(root: &Path) -> Vec<String> {
    let providers = provider_names(root);
    let mut found = Vec::new();
    for krate in PRODUCT {
        let dir = root.join(krate);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let shipped = manifest
            .split("[dev-dependencies]")
            .next()
            .unwrap_or_default();
        for (package, _) in &providers {
            if shipped.contains(package.as_str()) {
                found.push(format!("{krate}/Cargo.toml depends on `{package}`"));
            }
        }
        for path in rust_files(&dir.join("src")) {
            if is_test_file(&path) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (_, library) in &providers {
                if names(code, library) {
                    found.push(format!("{} names `{library}`", relative(root, &path)));
                }
            }
        }
    }
    found
}

/// The features a crate's manifest may add to an external crate, and why
/// the root does not carry them: (crate, dependency, reason).
const FEATURE_EXCEPTIONS: [(&str, &str, &str); 4] = [
    (
        "crates/test-apiserver",
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
fn added_features(root: &Path) -> Vec<String> {
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

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn the_repository_is_tidy() {
    let root = root();
    let mut problems = code_map_gaps(&root);
    problems.extend(long_files(&root));
    problems.extend(undocumented_modules(&root));
    problems.extend(clouds_named(&root));
    problems.extend(added_features(&root));
    assert!(
        problems.is_empty(),
        "{} tidy problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A throw-away workspace: one crate with one module, and a code map.
fn scratch(architecture: &str, module: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("crates/widget/src");
    std::fs::create_dir_all(&src).expect("src");
    std::fs::write(dir.path().join("crates/widget/Cargo.toml"), "").expect("manifest");
    std::fs::write(src.join("lib.rs"), "//! A widget.\nmod gears;\n").expect("lib.rs");
    std::fs::write(src.join("gears.rs"), module).expect("gears.rs");
    std::fs::write(dir.path().join("ARCHITECTURE.md"), architecture).expect("architecture");
    dir
}

const MAP: &str =
    "# Architecture\n## Code map\n### `crates/widget`\nGears turn in `gears`.\n## Invariants\n";

#[test]
fn a_file_made_too_long_is_refused() {
    let short = scratch(MAP, "//! Gears.\n");
    assert!(long_files(short.path()).is_empty());
    let text = format!("//! Gears.\n{}", "// turn\n".repeat(MAX_LINES));
    let long = scratch(MAP, &text);
    let found = long_files(long.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("gears.rs has 601 lines"), "{found:?}");
}

#[test]
fn a_module_without_its_doc_comment_is_refused() {
    let tidy = scratch(MAP, "//! Gears.\n");
    assert!(undocumented_modules(tidy.path()).is_empty());
    let bare = scratch(MAP, "fn turn() {}\n");
    let found = undocumented_modules(bare.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("gears.rs"), "{found:?}");
}

#[test]
fn a_crate_or_module_missing_from_the_code_map_is_refused() {
    let tidy = scratch(MAP, "//! Gears.\n");
    assert!(code_map_gaps(tidy.path()).is_empty());
    let unnamed = scratch(
        "## Code map\n### `crates/widget`\nNothing here.\n## Invariants\n`gears`\n",
        "//! Gears.\n",
    );
    assert_eq!(
        code_map_gaps(unnamed.path()),
        ["ARCHITECTURE.md's `crates/widget` section does not name its module `gears`"]
    );
    let no_section = scratch("## Code map\n### `crates/other`\n`gears`\n", "//! Gears.\n");
    assert_eq!(
        code_map_gaps(no_section.path()),
        ["ARCHITECTURE.md has no `### `crates/widget`` section"]
    );
}

#[test]
fn a_pattern_heading_covers_the_crates_it_matches() {
    assert!(heading_names(
        "### `cmd/*-cloud-controller-manager`\n",
        "cmd/aws-cloud-controller-manager"
    ));
    assert!(!heading_names(
        "### `cmd/*-cloud-controller-manager`\n",
        "crates/app"
    ));
    assert!(heading_names(
        "### `crates/app` (`ccm-app`)\n",
        "crates/app"
    ));
    assert!(!heading_names(
        "### `crates/app` (`ccm-app`)\n",
        "crates/ap"
    ));
}

/// Writes `text` to `path` under `root`, making its directories.
fn write_file(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
    std::fs::write(path, text).expect("a file");
}

#[test]
fn a_product_crate_naming_a_cloud_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let write = |path: &str, text: &str| write_file(root, path, text);
    write("providers/acme-cloud/Cargo.toml", "");
    write(
        "crates/app/Cargo.toml",
        "[dependencies]\nserde = \"1\"\n[dev-dependencies]\nprovider-acme-cloud = { path = \"x\" }\n",
    );
    write(
        "crates/app/src/lib.rs",
        "//! App.\nfn f() {}\n#[cfg(test)]\nmod t { use provider_acme_cloud::Cloud; }\n",
    );
    write(
        "crates/app/src/wiring/tests.rs",
        "//! T.\nuse provider_acme_cloud::Cloud;\n",
    );
    assert!(clouds_named(root).is_empty(), "{:?}", clouds_named(root));
    write(
        "crates/app/src/logging.rs",
        "//! Logs.\n// cloudprovider_acme_cloud_calls_total\nconst OURS: &str = \"provider_acme_cloud\";\n",
    );
    write(
        "crates/runtime/Cargo.toml",
        "[dependencies]\nprovider-acme-cloud = { path = \"x\" }\n",
    );
    assert_eq!(
        clouds_named(root),
        [
            "crates/app/src/logging.rs names `provider_acme_cloud`",
            "crates/runtime/Cargo.toml depends on `provider-acme-cloud`",
        ]
    );
}

#[test]
fn a_crate_adding_features_to_an_external_crate_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let write = |path: &str, text: &str| write_file(root, path, text);
    write(
        "Cargo.toml",
        "[workspace.dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\nwidget-core = { path = \"crates/widget-core\" }\n",
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
