//! The `real-cluster` binary refuses what it cannot run, in one line. (It
//! is also built here, by the workspace's test build, so `cargo xtask ci`
//! runs the very binary this build made.)

use std::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_real-cluster");

#[test]
fn without_a_kubeconfig_path_it_exits_64_with_its_usage() {
    let out = Command::new(BINARY).output().expect("real-cluster runs");
    assert_eq!(out.status.code(), Some(64));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "usage: real-cluster KUBECONFIG_OUT\n"
    );
}

#[test]
fn without_the_binaries_it_names_the_variable_to_set() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let out = Command::new(BINARY)
        .arg(dir.path().join("kubeconfig"))
        .env_remove(ccm_test_support::KUBE_APISERVER_ENV)
        .env_remove(ccm_test_support::ETCD_ENV)
        .output()
        .expect("real-cluster runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("CCM_KUBE_APISERVER is not set"), "{stderr}");
    assert!(!dir.path().join("kubeconfig").exists());
}
