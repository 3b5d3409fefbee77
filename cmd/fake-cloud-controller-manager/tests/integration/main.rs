//! The fake-cloud-controller-manager binary end to end, in one executable:
//! each module holds one concern's suite, as each file was an executable of
//! its own, each linking the app and the test API server again. The cluster
//! runner picks its real-cluster modules by name (e2e, admission,
//! csr_approver).

mod admission;
mod admission_serving;
mod binary;
mod csr_approver;
mod e2e;
mod leader_migration;
mod logging;
mod manifests;
mod secure_serving;
mod service_accounts;
mod shadow;
mod volumes;
