//! The AWS provider against moto, in one executable: each module holds one
//! concern's tests, as each file was an executable of its own (each linking
//! the provider and the AWS SDK again).

mod adoption;
mod cluster_id;
mod conformance;
mod instances;
mod inventory;
mod load_balancers;
mod routes;
mod volumes;
