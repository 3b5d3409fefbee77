//! The runtime against the test API server and fake providers, in one
//! executable: each module holds one primitive's tests (the batcher,
//! concurrency, events, the informer, the metered cloud), as each file was
//! an executable of its own.

mod batcher;
mod concurrency;
mod events;
mod informer;
mod metered_cloud;
