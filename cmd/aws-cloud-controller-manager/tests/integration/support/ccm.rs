//! The `aws-cloud-controller-manager` binary as a child process, through
//! the shared harness: dummy AWS keys and no metadata service in its
//! environment, and nothing else of the test process's.

use std::path::PathBuf;

pub use ccm_test_support::Ccm;
use ccm_test_support::Launch;

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_aws-cloud-controller-manager");

/// The log levels of the CCM's log file: debug for this project's crates.
const RUST_LOG: &str = "info,ccm_app=debug,ccm_runtime=debug,ccm_controllers=debug,ccm_leader_election=debug,ccm_provider_aws=debug";

/// Where the process of test `name` writes its log.
pub fn log_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("aws-ccm-{name}.log"))
}

/// The binary run with `args`, dummy AWS keys and the metadata service
/// disabled, its output in the log of test `name`.
pub fn launch(name: &str, args: &[String]) -> Launch {
    Launch::new(BINARY, log_path(name))
        .env(
            "AWS_ACCESS_KEY_ID",
            ccm_provider_aws::test_util::ACCESS_KEY_ID,
        )
        .env(
            "AWS_SECRET_ACCESS_KEY",
            ccm_provider_aws::test_util::SECRET_ACCESS_KEY,
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", RUST_LOG)
        .args(args.iter().cloned())
}
