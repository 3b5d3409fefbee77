//! The controller framework every controller shares, built on kube-runtime.
//!
//! Start with [`Context`]: what a controller receives from the process —
//! the Kubernetes client, the shared [`Informers`] (one watch and cache per
//! resource kind, however many controllers use it), the provider wrapped in
//! [`MeteredCloud`] (every call counted and timed, every mutation fenced by
//! leadership), [`Metrics`] and the shutdown signal.
//!
//! A controller is a kube-runtime `Controller` driven by [`controller::run`],
//! which applies the framework's error policy ([`ReconcileError::retry`]:
//! per-object exponential backoff from 5 s to 300 s, the exact delay a
//! provider asked for, or waiting for a change), concurrency limit and
//! metrics. Per-node cloud lookups go through a [`Batcher`], so N nodes cost
//! ceil(N / batch) provider calls. [`Events`] publishes Kubernetes events.
//! Every reconcile, pass and provider call is recorded in an [`Activity`];
//! tests await a barrier over it (`ccm_test_support::Quiescence`) to know
//! the controllers have nothing left to do.
//!
//! This crate never names a cloud.

mod activity;
mod backoff;
mod batcher;
mod cloud;
mod concurrency;
mod context;
pub mod controller;
pub mod dry_run;
mod error;
mod events;
mod informer;
mod metrics;
mod pacer;
mod stalls;

pub use activity::{Activity, ActivitySnapshot, Busy};
pub use backoff::{FailureBackoff, controller_delay};
pub use batcher::{
    AnswerLost, Answers, BatchCall, Batcher, BatcherStopped, STREAM_WINDOWS, lookup_all,
    lookup_batches,
};
pub use cloud::{AlwaysLeader, Fence, Fenced, MeteredCloud};
pub use context::{Context, Informers};
pub use error::{ReconcileError, Retry};
pub use events::Events;
pub use informer::{Changes, EventHook, Informer, InformerError, Lean};
pub use metrics::Metrics;
pub use stalls::{Running, STALLED_AFTER};

/// Re-exported so controllers use the same kube-runtime types.
pub use kube::runtime::controller::Action;
pub use kube::runtime::reflector::{ObjectRef, Store};
pub use kube::runtime::watcher::Event as WatchEvent;
