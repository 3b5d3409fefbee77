//! The runner's command line: what it refuses before starting anything.

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_upstream-bench"))
        .args(args)
        .output()
        .expect("the runner starts")
}

#[test]
fn outside_a_private_network_namespace_it_refuses_to_start_anything() {
    let out = tempfile_dir();
    let out = bench(&[
        "--binary=ours=/bin/true",
        "--nodes=1",
        &format!("--out={}", out.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("upstream-bench: refusing to run outside a private network namespace"),
        "{stderr}"
    );
}

#[test]
fn a_binary_that_is_not_name_equals_path_is_refused_by_name() {
    let out = bench(&["--binary=/bin/true", "--out=/tmp/x", "--isolated"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("`/bin/true` is not NAME=PATH"), "{stderr}");
}

fn tempfile_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("upstream-bench-cli-{}", std::process::id()))
}
