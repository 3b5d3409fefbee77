//! The Rancher provider against its fake API, in one executable: each module
//! holds one concern's tests, as each file was an executable of its own.

mod support;

mod call_counts;
mod conformance;
mod dry_run;
mod instances;
mod ownership;
