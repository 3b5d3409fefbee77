//! The test API server's contract tests, in one executable: each module
//! holds one area of the contract, and each contract test runs the same body
//! against the in-memory server and (ignored by default) against the real
//! cluster `KUBECONFIG` points at. One executable instead of one per area:
//! each linked the whole server and the kube client again (22 of them,
//! 1.3 GB), and `cargo xtask ci` runs the real-cluster variants one module
//! at a time, as it ran one executable at a time.

#[macro_use]
mod support;

mod accounting;
mod auth;
mod binary;
mod certificates;
mod deletion;
mod events;
mod faults;
mod identities;
mod kinds;
mod kubectl;
mod lists;
mod objects;
mod patches;
mod protobuf;
mod rbac;
mod refusals;
mod scale;
mod service_conditions;
mod status;
mod tables;
mod tables_more;
mod validation;
mod validation_meta;
mod watcher;
mod watches;
mod webhook_configurations;
