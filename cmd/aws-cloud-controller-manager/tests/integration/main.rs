//! The aws-cloud-controller-manager binary end to end, in one executable:
//! each module holds one concern's suite (against the test API server or,
//! with the cluster runner's variables, a real kube-apiserver; moto behind a
//! counting proxy), as each file was an executable of its own, each linking
//! the app, the provider and the AWS SDK again.

#[macro_use]
mod support;

mod audit;
mod call_budgets;
mod classic_elb;
mod crash_points;
mod dry_run;
mod load_balancers;
mod manifests;
mod nodes;
mod process;
mod provider_controllers;
mod service_conditions;
mod upstream_flags;
mod volumes;
