//! Tidy: what the compiler does not check but this repository promises.
//!
//! - ARCHITECTURE.md's code map has a section for every crate (every
//!   workspace member); the modules are the module docs' to describe.
//! - ARCHITECTURE.md stays a map: at most 500 lines.
//! - No Rust file passes 600 lines.
//! - Every Rust file (module, test or bench) opens with a `//!` comment.
//! - The product's crates (the framework a provider binary is built from)
//!   name no cloud: no provider crate among their dependencies, none in
//!   their code outside its tests.
//! - A crate's manifest adds features to no external crate (the root
//!   `Cargo.toml` pins each with the union of what any crate needs), but for
//!   the exceptions `FEATURE_EXCEPTIONS` lists with their reasons
//!   (`tidy/manifests.rs`).
//! - The interface crate and the providers depend on no Kubernetes client
//!   (`tidy/manifests.rs`).
//! - No crate has a module cycle: no file reaches itself through the
//!   modules it names (`tidy/cycles.rs`).
//! - One naming rule: a crate's package is named after its directory, its
//!   library and its dependency key after its package; and no product crate
//!   ships a crate of `testing/` (`tidy/layout.rs`).
//!
//! Each rule is a function over a directory, so its own test can break it
//! on purpose in a temporary tree.

use std::path::{Path, PathBuf};

#[path = "tidy/cycles.rs"]
mod cycles;
#[path = "tidy/layout.rs"]
mod layout;
#[path = "tidy/manifests.rs"]
mod manifests;

use cycles::module_cycles;
use layout::{crate_names, proving_ground_shipped, test_executables};
use manifests::{added_features, kubernetes_clients};

/// The most lines a Rust file may have.
const MAX_LINES: usize = 600;

/// The most lines ARCHITECTURE.md may have: it maps the crates, and the
/// module docs tell the rest.
const MAX_ARCHITECTURE_LINES: usize = 500;

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

/// The workspace's crates, as paths relative to `root`: the root
/// manifest's `[workspace] members`, a `dir/*` standing for every directory
/// under `dir` with a Cargo.toml.
fn crates(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let mut found = Vec::new();
    for member in members(&manifest) {
        let Some(group) = member.strip_suffix("/*") else {
            if root.join(&member).join("Cargo.toml").is_file() {
                found.push(member);
            }
            continue;
        };
        for dir in crate_dirs(&root.join(group)) {
            found.push(format!("{group}/{dir}"));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The `members` array of a manifest's `[workspace]` table, on one line or
/// several.
fn members(manifest: &str) -> Vec<String> {
    let mut table = "";
    let mut array = String::new();
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if array.is_empty() {
            if line.starts_with('[') {
                table = line;
            } else if table == "[workspace]" {
                let value = line.strip_prefix("members").map(str::trim_start);
                if let Some(value) = value.and_then(|v| v.strip_prefix('=')) {
                    array.push_str(value.trim());
                }
            }
        } else {
            array.push_str(line);
        }
        if array.contains(']') {
            break;
        }
    }
    let inside = array.trim_start_matches('[').split(']').next();
    inside
        .unwrap_or_default()
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The directories under `dir` that hold a Cargo.toml, by name, sorted.
fn crate_dirs(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
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

/// The crates ARCHITECTURE.md's code map has no section for. The code map
/// is by crate: a section names the modules a newcomer needs to find their
/// way, and the modules' own docs say the rest.
fn code_map_gaps(root: &Path) -> Vec<String> {
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    crates(root)
        .into_iter()
        .filter(|krate| section(&architecture, krate).is_none())
        .map(|krate| format!("ARCHITECTURE.md has no `### `{krate}`` section"))
        .collect()
}

/// ARCHITECTURE.md, when it has more than [`MAX_ARCHITECTURE_LINES`] lines.
fn long_architecture(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    let lines = text.lines().count();
    if lines <= MAX_ARCHITECTURE_LINES {
        return Vec::new();
    }
    vec![format!(
        "ARCHITECTURE.md has {lines} lines (at most {MAX_ARCHITECTURE_LINES}): \
         map the crates, and leave the details to the module docs"
    )]
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
const PRODUCT: [&str; 6] = [
    "crates/app",
    "crates/runtime",
    "crates/controllers",
    "crates/cloud-provider",
    "crates/leader-election",
    "crates/rest",
];

/// Each provider under `providers/` as its package and library names say
/// it: `ccm-provider-<dir>` and `ccm_provider_<dir>`.
fn provider_names(root: &Path) -> Vec<(String, String)> {
    crate_dirs(&root.join("providers"))
        .into_iter()
        .map(|dir| {
            (
                format!("ccm-provider-{dir}"),
                format!("ccm_provider_{}", dir.replace('-', "_")),
            )
        })
        .collect()
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
/// `legacy_ccm_provider_aws_total` in a metric's name is not `ccm_provider_aws`).
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
    problems.extend(long_architecture(&root));
    problems.extend(long_files(&root));
    problems.extend(undocumented_modules(&root));
    problems.extend(clouds_named(&root));
    problems.extend(added_features(&root));
    problems.extend(kubernetes_clients(&root));
    problems.extend(module_cycles(&root, &crates(&root)));
    problems.extend(crate_names(&root));
    problems.extend(proving_ground_shipped(&root));
    problems.extend(test_executables(&root));
    assert!(
        problems.is_empty(),
        "{} tidy problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The root manifest of a throw-away workspace.
const WORKSPACE: &str = "[workspace]\nmembers = [\"crates/*\"]\n";

/// A throw-away workspace: one crate with one module, and a code map.
fn scratch(architecture: &str, module: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("Cargo.toml"), WORKSPACE).expect("workspace");
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
fn a_crate_missing_from_the_code_map_is_refused() {
    let tidy = scratch(MAP, "//! Gears.\n");
    assert!(code_map_gaps(tidy.path()).is_empty());
    let modules_unnamed = scratch(
        "## Code map\n### `crates/widget`\nA widget.\n## Invariants\n",
        "//! Gears.\n",
    );
    assert!(code_map_gaps(modules_unnamed.path()).is_empty());
    let no_section = scratch("## Code map\n### `crates/other`\n`gears`\n", "//! Gears.\n");
    assert_eq!(
        code_map_gaps(no_section.path()),
        ["ARCHITECTURE.md has no `### `crates/widget`` section"]
    );
}

#[test]
fn an_architecture_over_500_lines_is_refused() {
    let padding = "A line of the map.\n".repeat(MAX_ARCHITECTURE_LINES - MAP.lines().count());
    let full = scratch(&format!("{MAP}{padding}"), "//! Gears.\n");
    assert!(long_architecture(full.path()).is_empty());
    let over = scratch(&format!("{MAP}{padding}One too many.\n"), "//! Gears.\n");
    let found = long_architecture(over.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("ARCHITECTURE.md has 501 lines (at most 500)"),
        "{found:?}"
    );
}

#[test]
fn the_crates_are_the_workspace_members() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let write = |path: &str, text: &str| write_file(root, path, text);
    write(
        "Cargo.toml",
        "[workspace]\nresolver = \"3\"\nmembers = [\n  \"crates/*\", # the product\n  \"crates/testing/*\",\n  \"xtask\",\n]\n[workspace.metadata]\nmembers = [\"elsewhere\"]\n",
    );
    write("crates/app/Cargo.toml", "");
    write("crates/testing/test-apiserver/Cargo.toml", "");
    write("crates/notes/README.md", "");
    write("xtask/Cargo.toml", "");
    write("elsewhere/Cargo.toml", "");
    assert_eq!(
        crates(root),
        ["crates/app", "crates/testing/test-apiserver", "xtask"]
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
        "[dependencies]\nserde = \"1\"\n[dev-dependencies]\nccm-provider-acme-cloud = { path = \"x\" }\n",
    );
    write(
        "crates/app/src/lib.rs",
        "//! App.\nfn f() {}\n#[cfg(test)]\nmod t { use ccm_provider_acme_cloud::Cloud; }\n",
    );
    write(
        "crates/app/src/wiring/tests.rs",
        "//! T.\nuse ccm_provider_acme_cloud::Cloud;\n",
    );
    assert!(clouds_named(root).is_empty(), "{:?}", clouds_named(root));
    write(
        "crates/app/src/logging.rs",
        "//! Logs.\n// legacy_ccm_provider_acme_cloud_calls_total\nconst OURS: &str = \"ccm_provider_acme_cloud\";\n",
    );
    write(
        "crates/runtime/Cargo.toml",
        "[dependencies]\nccm-provider-acme-cloud = { path = \"x\" }\n",
    );
    assert_eq!(
        clouds_named(root),
        [
            "crates/app/src/logging.rs names `ccm_provider_acme_cloud`",
            "crates/runtime/Cargo.toml depends on `ccm-provider-acme-cloud`",
        ]
    );
}

/// A throw-away crate `crates/widget` with the given files under `src/`,
/// and the cycles the rule finds in it.
fn cycles_in(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        write_file(dir.path(), &format!("crates/widget/src/{path}"), text);
    }
    module_cycles(dir.path(), &["crates/widget".to_owned()])
}

#[test]
fn a_module_cycle_is_refused() {
    let lib = "//! W.\nmod a;\nmod b;\n";
    let one_way = [
        ("lib.rs", lib),
        ("a.rs", "//! A.\nuse crate::b::B;\npub struct A(B);\n"),
        ("b.rs", "//! B.\npub struct B;\n"),
    ];
    assert!(cycles_in(&one_way).is_empty(), "{:?}", cycles_in(&one_way));
    // Back by a path in code, not a `use`.
    let both_ways = [
        ("lib.rs", lib),
        ("a.rs", "//! A.\nuse crate::b::B;\npub fn a() {}\n"),
        ("b.rs", "//! B.\npub struct B;\nfn f() { super::a::a() }\n"),
    ];
    assert_eq!(
        cycles_in(&both_ways),
        [
            "module cycle (2 files in one circle): crates/widget/src/a.rs -> crates/widget/src/b.rs -> crates/widget/src/a.rs"
        ]
    );
}

#[test]
fn a_cycle_through_a_reexport_is_refused() {
    // `crate::B` is `b::B`, passed on by lib.rs: `a` depends on `b`.
    let files = [
        ("lib.rs", "//! W.\nmod a;\nmod b;\npub use b::B;\n"),
        ("a.rs", "//! A.\nuse crate::B;\npub fn a() {}\n"),
        ("b.rs", "//! B.\npub struct B;\nfn f() { crate::a::a() }\n"),
    ];
    let found = cycles_in(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("src/a.rs -> crates/widget/src/b.rs"),
        "{found:?}"
    );
}

#[test]
fn ancestors_tests_and_visibility_are_not_cycles() {
    let files = [
        (
            "lib.rs",
            "//! W.\nmod gears;\nmod b;\npub use gears::Gear;\npub struct Axle;\n",
        ),
        // A child uses its parent's item, as `use super::*` does.
        (
            "gears.rs",
            "//! G.\nuse crate::Axle;\npub(crate) struct Gear(Axle);\nmod teeth;\n",
        ),
        (
            "gears/teeth.rs",
            "//! T.\nuse super::super::Axle;\nuse super::*;\n",
        ),
        // Tests may reach anywhere; `pub(super)` names no dependency.
        (
            "b.rs",
            "//! B.\nuse crate::gears::Gear;\npub(super) fn b(_: Gear) {}\n",
        ),
        ("gears/tests.rs", "//! Tests.\nuse crate::b::b;\n"),
    ];
    let mut with_tests = files.to_vec();
    with_tests.push((
        "gears.rs",
        "//! G.\nuse crate::Axle;\npub(crate) struct Gear(Axle);\nmod teeth;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline { use crate::b::b; }\n",
    ));
    assert!(cycles_in(&files).is_empty(), "{:?}", cycles_in(&files));
    assert!(
        cycles_in(&with_tests).is_empty(),
        "{:?}",
        cycles_in(&with_tests)
    );
    // The same inline module outside a test is a cycle.
    let mut inline = files.to_vec();
    inline.push((
        "gears.rs",
        "//! G.\nuse crate::Axle;\npub(crate) struct Gear(Axle);\nmod teeth;\nmod inline { use crate::b::b; }\n",
    ));
    assert_eq!(cycles_in(&inline).len(), 1, "{:?}", cycles_in(&inline));
}
