//! The DigitalOcean provider against the fake DigitalOcean API behind Prism,
//! in one executable: each module holds one concern's tests, as each file
//! was an executable of its own (each linking the provider and the emulator
//! again).

#[macro_use]
mod support;

mod annotations;
mod conformance;
mod contract;
mod drop_in;
mod dry_run;
mod firewall;
mod instances;
mod inventory;
mod load_balancer_health;
mod load_balancers;
mod pagination;
mod provider;
mod rate_limits;
mod retag;
mod volumes;
