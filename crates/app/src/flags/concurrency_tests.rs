//! The controllers' concurrency flags: their ranges, and the checks
//! upstream 1.36 and 1.37 added for the node controllers' workers.

use super::tests::{bad, ok};

#[test]
fn concurrency_flags() {
    assert_eq!(
        ok(&["--concurrent-service-syncs=5"]).concurrent_service_syncs,
        5
    );
    bad(
        &["--concurrent-service-syncs=0"],
        "`0` is not a whole number from 1 to 65535",
    );
    assert_eq!(ok(&["--concurrent-node-syncs=4"]).concurrent_node_syncs, 4);
    bad(
        &["--concurrent-node-syncs=many"],
        "`many` is not a whole number",
    );
    // Upstream 1.36 and 1.37 refuse these at start, in these words.
    ok(&["--concurrent-node-status-updates=0"]);
    bad(
        &["--concurrent-node-status-updates=-1"],
        "concurrent-node-status-updates cannot be a negative number",
    );
    assert_eq!(
        ok(&["--concurrent-node-lifecycle-syncs=3"]).concurrent_node_lifecycle_syncs,
        3
    );
    bad(
        &["--concurrent-node-lifecycle-syncs=0"],
        "concurrent-node-lifecycle-syncs must be at least 1, but got 0",
    );
}
