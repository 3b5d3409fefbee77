//! The controllers against the test API server, in one executable: each
//! module holds one controller's (or one concern's) tests. One executable
//! instead of one per module: each linked the controllers, the server and
//! the kube client again (10 of them, 0.78 GB).

#[macro_use]
mod support;

mod api_budget;
mod csr_approver;
mod node;
mod node_lifecycle;
mod provider_controllers;
mod pv_label;
mod route;
mod service;
mod service_conditions;
mod service_errors;
mod service_nodes;
mod service_observer;
mod service_warnings;
