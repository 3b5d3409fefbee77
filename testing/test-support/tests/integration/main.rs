//! The test support crate's own checks, in one executable: the chart's RBAC
//! against what the suites send, and the real-cluster launcher.

mod chart_rbac;
mod real_cluster;
