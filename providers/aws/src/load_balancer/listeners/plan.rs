//! What a Network Load Balancer's listeners and target groups need, as a
//! list of typed operations: decided from the listeners as read and each
//! Service port's target group, with no call made.
//!
//! # Guarantees
//! - A port's listener that already does what the port asks (protocol,
//!   target group, and for TLS the certificate and a named policy) is left
//!   alone; one that differs is modified in place; a port without one gets
//!   one.
//! - A listener on a port the Service dropped is deleted, before any
//!   target group.
//! - A target group is deleted only when it is among the `owned` (this
//!   Service's, by its tags) and no wanted port forwards to it.
//! - Carried out, the plan leaves nothing to plan (a property test holds
//!   these on a model of the listeners).

use aws_sdk_elasticloadbalancingv2::types::{Listener, ProtocolEnum};

use super::forward_target;
use crate::load_balancer::spec::PortMapping;

/// One change to the listeners or target groups, in the order made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ListenerOp<'a> {
    /// A listener on `port`, forwarding to `target_group`.
    Create {
        port: &'a PortMapping,
        target_group: &'a str,
    },
    /// `listener` brought to what `port` asks, forwarding to `target_group`.
    Modify {
        listener: &'a Listener,
        port: &'a PortMapping,
        target_group: &'a str,
    },
    /// `listener`, on a port the Service no longer has.
    Delete { listener: &'a Listener },
    /// A target group of the Service's that no port forwards to any more.
    DeleteTargetGroup { arn: &'a str },
}

/// Whether `listener` already does what `port` asks, forwarding to `tg`.
pub(crate) fn listener_matches(listener: &Listener, port: &PortMapping, tg: &str) -> bool {
    let certificate = listener
        .certificates()
        .first()
        .and_then(|c| c.certificate_arn());
    let policy_matches = match (&port.listener_protocol, &port.ssl_policy) {
        (ProtocolEnum::Tls, Some(policy)) => listener.ssl_policy() == Some(policy.as_str()),
        // Without a policy AWS picks its default; leave whatever it chose.
        _ => true,
    };
    listener.protocol() == Some(&port.listener_protocol)
        && forward_target(listener) == Some(tg)
        && (port.listener_protocol != ProtocolEnum::Tls
            || certificate == port.certificate_arn.as_deref())
        && policy_matches
}

/// The operations that make `listeners` forward each port of `wanted` to
/// its target group: each port's create or modify, in the ports' order,
/// then the listeners on dropped ports, then the `owned` target groups no
/// port of `wanted` forwards to.
pub(crate) fn plan<'a>(
    listeners: &'a [Listener],
    wanted: &'a [(&'a PortMapping, String)],
    owned: &[&'a str],
) -> Vec<ListenerOp<'a>> {
    let mut ops = Vec::new();
    for (port, tg) in wanted {
        match listeners.iter().find(|l| l.port() == Some(port.port)) {
            Some(l) if listener_matches(l, port, tg) => {}
            Some(listener) => ops.push(ListenerOp::Modify {
                listener,
                port,
                target_group: tg,
            }),
            None => ops.push(ListenerOp::Create {
                port,
                target_group: tg,
            }),
        }
    }
    ops.extend(
        listeners
            .iter()
            .filter(|l| !wanted.iter().any(|(p, _)| Some(p.port) == l.port()))
            .map(|listener| ListenerOp::Delete { listener }),
    );
    ops.extend(
        owned
            .iter()
            .filter(|arn| !wanted.iter().any(|(_, tg)| tg == *arn))
            .map(|arn| ListenerOp::DeleteTargetGroup { arn }),
    );
    ops
}

#[cfg(test)]
mod tests;
