//! Cloud calls by class, each paced and limited on its own: a cloud that
//! throttles route creates does not hold back a Service's load balancer
//! (on AWS they are even different services, EC2 and ELB, with separate
//! limits), and reads wait behind neither.

use crate::concurrency::{AdaptiveLimit, Permit};
use crate::metrics::{ClassLabels, Metrics};
use crate::pacer::Pacer;

/// The most mutations of a class in flight: upstream's route controller
/// keeps up to 200 route creates going (`maxConcurrentRouteCreations`);
/// the controllers' `--concurrent-*` flags bound their own calls below it.
const MAX_IN_FLIGHT: usize = 200;

/// What kind of cloud call an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Route lists, creates and deletes.
    Routes,
    /// Load-balancer ensures, updates and deletes.
    LoadBalancers,
    /// Everything else: reads, and provider controllers' calls.
    Other,
}

impl Class {
    /// The class of the interface method `operation`.
    pub(super) fn of(operation: &str) -> Self {
        match operation {
            "list_routes" | "create_route" | "create_routes" | "delete_route" => Self::Routes,
            "ensure_load_balancer" | "update_load_balancer" | "ensure_load_balancer_deleted" => {
                Self::LoadBalancers
            }
            _ => Self::Other,
        }
    }
}

/// A pacer per class, and an adaptive concurrency limit per class of
/// mutations.
#[derive(Debug)]
pub(super) struct Classes {
    routes: (Pacer, AdaptiveLimit),
    load_balancers: (Pacer, AdaptiveLimit),
    other: Pacer,
}

impl Classes {
    pub(super) fn new(metrics: &Metrics) -> Self {
        let limit = |class: &str| {
            let gauge = metrics
                .concurrency_limit
                .get_or_create(&ClassLabels {
                    class: class.into(),
                })
                .clone();
            AdaptiveLimit::new(MAX_IN_FLIGHT, gauge)
        };
        Self {
            routes: (Pacer::default(), limit("routes")),
            load_balancers: (Pacer::default(), limit("load_balancers")),
            other: Pacer::default(),
        }
    }

    /// The pacer calls of `class` wait on.
    pub(super) fn pacer(&self, class: Class) -> &Pacer {
        match class {
            Class::Routes => &self.routes.0,
            Class::LoadBalancers => &self.load_balancers.0,
            Class::Other => &self.other,
        }
    }

    /// Room for one call of `class`, when the class is limited.
    pub(super) async fn permit(&self, class: Class) -> Option<Permit<'_>> {
        match class {
            Class::Routes => Some(self.routes.1.acquire().await),
            Class::LoadBalancers => Some(self.load_balancers.1.acquire().await),
            Class::Other => None,
        }
    }
}
