//! Replays the committed corpus (`fuzz/corpus/<target>/`) through every
//! target on stable, and checks that targets, corpus directories and
//! cargo-fuzz binaries name each other.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use ccm_fuzz_targets::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The names of the entries of `dir` with their extension cut off.
fn stems(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("directory entry").path();
            path.file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn every_corpus_file_runs_through_its_target_without_panicking() {
    let mut panicked = Vec::new();
    for target in TARGETS {
        let dir = fuzz_dir().join("corpus").join(target.name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| {
                panic!(
                    "corpus of `{}` missing: {}: {e}",
                    target.name,
                    dir.display()
                )
            })
            .map(|entry| entry.expect("directory entry").path())
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        assert!(
            !files.is_empty(),
            "corpus of `{}` is empty: {}",
            target.name,
            dir.display()
        );
        for file in files {
            let data = std::fs::read(&file)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
            if catch_unwind(AssertUnwindSafe(|| (target.run)(&data))).is_err() {
                panicked.push(file.display().to_string());
            }
        }
    }
    assert!(panicked.is_empty(), "targets panicked on {panicked:#?}");
}

#[test]
fn every_target_has_a_corpus_and_a_cargo_fuzz_binary_and_nothing_else_does() {
    let names: BTreeSet<String> = TARGETS.iter().map(|t| t.name.to_owned()).collect();
    assert_eq!(names.len(), TARGETS.len(), "a target name is used twice");
    assert_eq!(stems(&fuzz_dir().join("corpus")), names, "fuzz/corpus/");
    assert_eq!(
        stems(&fuzz_dir().join("fuzz_targets")),
        names,
        "fuzz/fuzz_targets/"
    );
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for name in &names {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] `{name}`"
        );
    }
}
