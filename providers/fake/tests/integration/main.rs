//! The fake cloud's provider, server and client together, in one executable:
//! each module holds one concern's tests, as each file was an executable of
//! its own.

#[macro_use]
mod support;

mod config;
mod conformance;
mod faults;
mod load_balancers;
mod routes;
mod server;
mod volumes;
