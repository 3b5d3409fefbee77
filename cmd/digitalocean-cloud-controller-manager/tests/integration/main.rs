//! The digitalocean-cloud-controller-manager binary end to end, in one
//! executable: each module holds one concern's suite (against the test API
//! server or, with the cluster runner's variables, a real kube-apiserver;
//! the fake DigitalOcean API behind Prism), as each file was an executable
//! of its own, each linking the app and the provider again.

#[macro_use]
mod support;

mod audit;
mod call_budgets;
mod drop_in;
mod load_balancers;
mod manifests;
mod nodes;
mod process;
mod service_conditions;
mod spec_examples;
mod volumes;
