//! What a run of `cargo xtask ci` compiled or reused in `target/debug`,
//! and the removal of everything else there at its end.
//!
//! Cargo never deletes an artifact: each change of the lock file, of a
//! crate's features or of the build's settings leaves the previous
//! generation of test executables (about 7 GB) beside the new one, and a
//! developer's target directory grew past 60 GB that way. Every build the
//! run makes in `target/debug` goes through [`run`], which reads cargo's
//! JSON messages (every unit, fresh ones too, names its files); [`prune`]
//! then removes from `target/debug/deps` each file whose hash no unit of
//! the run named.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use anyhow::Context;
use serde_json::Value;

/// The hashes (`-<16 hex digits>` in a file name) of the units built or
/// reused so far.
static USED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Runs `cargo` with `--message-format=json-render-diagnostics` appended
/// (its diagnostics and progress still shown on stderr) and records the
/// units it names. Fails as [`crate::cmd::run`] does.
pub(crate) fn run(cargo: &mut Command) -> anyhow::Result<()> {
    cargo.arg("--message-format=json-render-diagnostics");
    let shown = crate::cmd::display(cargo);
    let mut found = BTreeSet::new();
    let result = crate::cmd::run_lines(cargo, &shown, |line| found.extend(hashes_named(line)));
    USED.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(found);
    result
}

/// The hashes of the files one JSON message of cargo names.
fn hashes_named(line: &str) -> Vec<String> {
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    if message["reason"] != "compiler-artifact" {
        return Vec::new();
    }
    let files = message["filenames"].as_array().into_iter().flatten();
    files
        .chain(std::iter::once(&message["executable"]))
        .filter_map(Value::as_str)
        .filter_map(|path| Path::new(path).file_name()?.to_str().and_then(hash_of))
        .map(str::to_owned)
        .collect()
}

/// `0123456789abcdef` from `libkube-0123456789abcdef.rlib`,
/// `e2e-0123456789abcdef` or `e2e-0123456789abcdef.d`.
fn hash_of(file_name: &str) -> Option<&str> {
    let stem = file_name.split('.').next()?;
    let (_, hash) = stem.rsplit_once('-')?;
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hash)
}

/// Removes each file of `deps` that carries a hash no unit of this run
/// named; answers how many files and bytes went. Does nothing when no
/// build was recorded (a run that failed before building).
pub(crate) fn prune(deps: &Path) -> anyhow::Result<(usize, u64)> {
    let used = USED.lock().unwrap_or_else(PoisonError::into_inner).clone();
    if used.is_empty() {
        return Ok((0, 0));
    }
    let mut files = 0;
    let mut bytes = 0;
    let entries = match std::fs::read_dir(deps) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", deps.display())),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(hash) = name.to_str().and_then(hash_of) else {
            continue;
        };
        if used.contains(hash) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        std::fs::remove_file(entry.path())
            .with_context(|| format!("removing {}", entry.path().display()))?;
        files += 1;
        bytes += meta.len();
    }
    Ok((files, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_read_from_cargos_file_names_only() {
        assert_eq!(
            hash_of("libkube-0123456789abcdef.rlib"),
            Some("0123456789abcdef")
        );
        assert_eq!(hash_of("e2e-0123456789abcdef"), Some("0123456789abcdef"));
        assert_eq!(hash_of("e2e-0123456789abcdef.d"), Some("0123456789abcdef"));
        assert_eq!(hash_of("real-cluster"), None);
        assert_eq!(hash_of("libfoo-notahexhash00.rlib"), None);
    }

    #[test]
    fn an_artifact_message_names_its_files_and_executable() {
        let line = r#"{"reason":"compiler-artifact","filenames":["/t/debug/deps/libkube-00000000000000aa.rlib","/t/debug/deps/libkube-00000000000000aa.rmeta"],"executable":null}"#;
        assert_eq!(hashes_named(line), ["00000000000000aa", "00000000000000aa"]);
        let test = r#"{"reason":"compiler-artifact","filenames":[],"executable":"/t/debug/deps/e2e-00000000000000bb"}"#;
        assert_eq!(hashes_named(test), ["00000000000000bb"]);
        assert!(hashes_named(r#"{"reason":"build-finished","success":true}"#).is_empty());
        assert!(hashes_named("Compiling kube").is_empty());
    }

    #[test]
    fn prune_keeps_what_the_run_used_and_removes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "libkept-00000000000000aa.rlib",
            "kept-00000000000000aa.d",
            "stale-00000000000000cc",
            "stale-00000000000000cc.d",
            "no-hash-here",
        ] {
            std::fs::write(dir.path().join(name), b"12345").unwrap();
        }
        USED.lock().unwrap().insert("00000000000000aa".to_owned());
        let (files, bytes) = prune(dir.path()).unwrap();
        assert_eq!((files, bytes), (2, 10));
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "kept-00000000000000aa.d",
                "libkept-00000000000000aa.rlib",
                "no-hash-here"
            ]
        );
    }
}
