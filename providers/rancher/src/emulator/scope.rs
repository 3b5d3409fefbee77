//! Which services a service path reaches, and the lookup of one by ID
//! through it, shared by the read and write handlers.

use super::answer::Failure;
use super::state::{Service, Store};

/// Which services a service path reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// `/loadbalancerservices`.
    LoadBalancers,
    /// `/externalservices`.
    Externals,
    /// `/services`: every kind.
    Any,
}

impl Scope {
    /// The scope of a path's first segment, lowercased.
    pub(super) fn from_segment(segment: &str) -> Option<Self> {
        match segment {
            "loadbalancerservices" => Some(Self::LoadBalancers),
            "externalservices" => Some(Self::Externals),
            "services" => Some(Self::Any),
            _ => None,
        }
    }

    /// Whether `service` is reached through this scope.
    pub(super) fn covers(self, service: &Service) -> bool {
        match self {
            Self::LoadBalancers => service.balancer().is_some(),
            Self::Externals => service.balancer().is_none(),
            Self::Any => true,
        }
    }

    /// The resource type its collection lists.
    pub(super) fn resource_type(self) -> &'static str {
        match self {
            Self::LoadBalancers => "loadBalancerService",
            Self::Externals => "externalService",
            Self::Any => "service",
        }
    }

    /// Its collection's path segment.
    pub(super) fn segment(self) -> &'static str {
        match self {
            Self::LoadBalancers => "loadbalancerservices",
            Self::Externals => "externalservices",
            Self::Any => "services",
        }
    }
}

/// The service `id` as `scope` reaches it, removed or not (Cattle shows a
/// removed object by ID until it is purged): 404 when it does not exist or
/// is of another kind.
pub(super) fn find<'s>(store: &'s Store, scope: Scope, id: &str) -> Result<&'s Service, Failure> {
    store
        .service(id)
        .filter(|s| scope.covers(s))
        .ok_or_else(|| Failure::not_found(id))
}
