//! Which JSON field each protobuf field is, per message: one `message!` per
//! k8s-pb message the served kinds hold.

mod core;
mod groups;
mod meta;
mod pod;
mod volumes;
