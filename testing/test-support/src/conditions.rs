//! The load-balancer conditions the service controller writes on a
//! Service, as the binaries' end-to-end suites read them: one condition's
//! `(status, reason, message)`, and every state a test saw, in order.

use std::cell::RefCell;

use k8s_openapi::api::core::v1::Service;

/// Whether the cloud load balancer exists and the ingress is written.
pub const PROVISIONED: &str = "LoadBalancerProvisioned";
/// Whether every target passes the cloud's health check.
pub const TARGETS_HEALTHY: &str = "LoadBalancerTargetsHealthy";

/// `(status, reason, message)` of the Service's condition `type_`.
pub fn condition(service: &Service, type_: &str) -> Option<(String, String, String)> {
    let conditions = service.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Every state of the Service's two conditions a test read, in order:
/// `(type, status, reason)`, each kept when it differs from the type's
/// previous state.
#[derive(Debug, Default)]
pub struct Seen(RefCell<Vec<(String, String, String)>>);

impl Seen {
    /// Records the conditions of `service` as read now.
    pub fn record(&self, service: &Service) {
        let mut seen = self.0.borrow_mut();
        for type_ in [PROVISIONED, TARGETS_HEALTHY] {
            let Some((status, reason, _)) = condition(service, type_) else {
                continue;
            };
            let last = seen.iter().rev().find(|(t, _, _)| t == type_);
            if last.is_none_or(|(_, s, r)| (s, r) != (&status, &reason)) {
                seen.push((type_.to_owned(), status, reason));
            }
        }
    }

    /// The `(status, reason)` states of condition `type_`, in order.
    pub fn of(&self, type_: &str) -> Vec<(String, String)> {
        self.0
            .borrow()
            .iter()
            .filter(|(t, _, _)| t == type_)
            .map(|(_, s, r)| (s.clone(), r.clone()))
            .collect()
    }
}

/// `(status, reason)` pairs as [`Seen::of`] answers them.
pub fn states(states: &[(&str, &str)]) -> Vec<(String, String)> {
    states
        .iter()
        .map(|(s, r)| ((*s).to_owned(), (*r).to_owned()))
        .collect()
}
