//! The router: which method and path reach which handler, and the read
//! handlers (hosts, addresses, settings, stacks, services and their
//! related collections). Writes live in `writes`.
//!
//! Collection and link names match case-insensitively (`loadBalancerServices`
//! works as well as `loadbalancerservices`), as they do in Cattle.

use axum::http::{Method, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

use super::answer::{Answer, Failure};
use super::filters::{self, Listing, Query};
use super::render::LB_IMAGE_SETTING_ID;
use super::scope::{Scope, find};
use super::state::{HOST_PREFIX, IP_PREFIX, Service, Store, parse_id};
use super::writes;

/// One request, past authentication and faults.
#[derive(Debug)]
pub(super) struct Request<'a> {
    pub(super) method: &'a Method,
    /// The path under the project base, such as `/hosts/1h1`.
    pub(super) path: &'a str,
    pub(super) query: &'a Query,
    pub(super) body: &'a [u8],
    pub(super) now: Instant,
}

/// The fields service collections filter on.
const SERVICE_FIELDS: &[&str] = &["id", "name", "stackId"];

/// Answers `request`.
pub(super) fn route(store: &mut Store, request: &Request<'_>) -> Answer {
    let mut segments: Vec<String> = request
        .path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    // Type and link names are case-insensitive; IDs are not.
    for i in [0, 2] {
        if let Some(segment) = segments.get_mut(i) {
            *segment = segment.to_ascii_lowercase();
        }
    }
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let action = request.query.get("action");
    let method = request.method.as_str();
    if let (Some(action), "POST", [_]) = (action, method, segments.as_slice()) {
        return Err(Failure::unprocessable(
            "InvalidAction",
            format!("no collection action {action} on {}", request.path),
        ));
    }
    if let Some(scope) = segments.first().copied().and_then(Scope::from_segment) {
        return route_services(store, request, scope, &segments[1..]);
    }
    let answer = match (method, segments.as_slice()) {
        ("GET", []) => Ok(store.project_json()),
        ("GET", ["hosts"]) => list_hosts(store, request.query),
        ("GET", ["hosts", id]) => host(store, id, request.query),
        ("GET", ["hosts", id, "ipaddresses"]) => host_ips(store, id, request.query),
        ("GET", ["ipaddresses"]) => list_ips(store, request.query),
        ("GET", ["ipaddresses", id]) => parse_id(IP_PREFIX, id)
            .and_then(|n| store.ips.get(&n))
            .map(|ip| store.ip_json(ip))
            .ok_or_else(|| Failure::not_found(id)),
        ("GET", ["settings"]) => list_settings(store, request.query),
        ("GET", ["settings", id]) if *id == LB_IMAGE_SETTING_ID => Ok(store.setting_json()),
        ("GET", ["settings", id]) => Err(Failure::not_found(id)),
        ("GET", ["stacks"]) => list_stacks(store, request.query),
        ("POST", ["stacks"]) => return writes::create_stack(store, request.body, request.now),
        ("GET", ["stacks", id]) => store
            .stack(id)
            .map(|s| store.stack_json(s))
            .ok_or_else(|| Failure::not_found(id)),
        ("DELETE", ["stacks", id]) => writes::delete_stack(store, id, request.now),
        ("POST", [_, _]) if action.is_some() => Err(Failure::unprocessable(
            "InvalidAction",
            format!("{} has no actions", request.path),
        )),
        _ if known_path(&segments) => {
            Err(Failure::method_not_allowed(request.method, request.path))
        }
        _ => Err(Failure::not_found(request.path)),
    };
    answer.map(|value| (StatusCode::OK, value))
}

fn known_path(segments: &[&str]) -> bool {
    matches!(
        segments,
        [] | ["hosts" | "ipaddresses" | "settings" | "stacks"]
            | ["hosts" | "ipaddresses" | "settings" | "stacks", _]
            | ["hosts", _, "ipaddresses"]
    )
}

fn route_services(store: &mut Store, request: &Request<'_>, scope: Scope, rest: &[&str]) -> Answer {
    let query = request.query;
    let now = request.now;
    let ok = |value: Value| (StatusCode::OK, value);
    match (request.method.as_str(), rest) {
        ("GET", []) => list_services(store, scope, query, now).map(ok),
        ("POST", []) => match scope {
            Scope::LoadBalancers => writes::create_load_balancer(store, request.body, now),
            Scope::Externals => writes::create_external(store, request.body, now),
            Scope::Any => Err(Failure::method_not_allowed(request.method, request.path)),
        },
        ("GET", [id]) => find(store, scope, id).map(|s| ok(store.service_json(s, now))),
        ("PUT", [id]) => writes::update_service(store, scope, id, request.body, now).map(ok),
        ("DELETE", [id]) => writes::delete_service(store, scope, id, now).map(ok),
        ("POST", [id]) => match query.get("action") {
            Some(action) => {
                writes::service_action(store, scope, id, action, request.body, now).map(ok)
            }
            None => Err(Failure::method_not_allowed(request.method, request.path)),
        },
        ("GET", [id, link]) if *link == "consumedservices" || *link == "consumedbyservices" => {
            related(store, scope, id, link, query, now).map(ok)
        }
        (_, [] | [_]) => Err(Failure::method_not_allowed(request.method, request.path)),
        (_, [_, "consumedservices" | "consumedbyservices"]) => {
            Err(Failure::method_not_allowed(request.method, request.path))
        }
        _ => Err(Failure::not_found(request.path)),
    }
}

fn list_hosts(store: &Store, query: &Query) -> Result<Value, Failure> {
    let with_ips = store.honours_include && query.includes("ipAddresses");
    let items = store
        .hosts
        .iter()
        .map(|(n, h)| (*n, store.host_json(h, with_ips)))
        .collect();
    let url = store.url("/hosts");
    let listing = Listing {
        resource_type: "host",
        url: &url,
        fields: &["id", "name", "uuid", "hostname"],
    };
    filters::page(listing, items, query)
}

fn host(store: &Store, id: &str, query: &Query) -> Result<Value, Failure> {
    parse_id(HOST_PREFIX, id)
        .and_then(|n| store.hosts.get(&n))
        .map(|h| store.host_json(h, store.honours_include && query.includes("ipAddresses")))
        .ok_or_else(|| Failure::not_found(id))
}

fn host_ips(store: &Store, id: &str, query: &Query) -> Result<Value, Failure> {
    let host = parse_id(HOST_PREFIX, id)
        .and_then(|n| store.hosts.get(&n))
        .ok_or_else(|| Failure::not_found(id))?;
    let items = host
        .ips
        .iter()
        .filter_map(|n| store.ips.get(n).map(|ip| (*n, store.ip_json(ip))))
        .collect();
    let url = store.url(&format!("/hosts/{id}/ipaddresses"));
    let listing = Listing {
        resource_type: "ipAddress",
        url: &url,
        fields: &["id", "address"],
    };
    filters::page(listing, items, query)
}

fn list_ips(store: &Store, query: &Query) -> Result<Value, Failure> {
    let items = store
        .ips
        .iter()
        .map(|(n, ip)| (*n, store.ip_json(ip)))
        .collect();
    let url = store.url("/ipaddresses");
    let listing = Listing {
        resource_type: "ipAddress",
        url: &url,
        fields: &["id", "address"],
    };
    filters::page(listing, items, query)
}

fn list_settings(store: &Store, query: &Query) -> Result<Value, Failure> {
    let url = store.url("/settings");
    let listing = Listing {
        resource_type: "setting",
        url: &url,
        fields: &["id", "name", "value"],
    };
    filters::page(listing, vec![(1, store.setting_json())], query)
}

fn list_stacks(store: &Store, query: &Query) -> Result<Value, Failure> {
    let items = store
        .stacks
        .iter()
        .map(|(n, s)| (*n, store.stack_json(s)))
        .collect();
    let url = store.url("/stacks");
    let listing = Listing {
        resource_type: "stack",
        url: &url,
        fields: &["id", "name", "externalId"],
    };
    filters::page(listing, items, query)
}

fn list_services(
    store: &Store,
    scope: Scope,
    query: &Query,
    now: Instant,
) -> Result<Value, Failure> {
    let items = store
        .services
        .iter()
        .filter(|(_, s)| scope.covers(s))
        .map(|(n, s)| (*n, store.service_json(s, now)))
        .collect();
    let url = store.url(&format!("/{}", scope.segment()));
    let listing = Listing {
        resource_type: scope.resource_type(),
        url: &url,
        fields: SERVICE_FIELDS,
    };
    filters::page(listing, items, query)
}

/// `consumedservices` (the services a service links to) or
/// `consumedbyservices` (the load balancers linking to it), each listed as
/// its own type, without removed ones.
fn related(
    store: &Store,
    scope: Scope,
    id: &str,
    link: &str,
    query: &Query,
    now: Instant,
) -> Result<Value, Failure> {
    let service = find(store, scope, id)?;
    let linked = |other: &Service| {
        if link == "consumedservices" {
            service
                .balancer()
                .is_some_and(|b| b.links.contains(&other.id))
        } else {
            other
                .balancer()
                .is_some_and(|b| b.links.contains(&service.id))
        }
    };
    let items = store
        .services
        .iter()
        .filter(|(_, s)| s.life.removed().is_none() && linked(s))
        .map(|(n, s)| (*n, store.service_json(s, now)))
        .collect();
    let url = format!("{}/{}/{id}/{link}", store.base, scope.segment());
    let listing = Listing {
        resource_type: "service",
        url: &url,
        fields: SERVICE_FIELDS,
    };
    filters::page(listing, items, query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_paths_cover_every_read_route() {
        assert!(known_path(&[]));
        assert!(known_path(&["hosts", "1h1", "ipaddresses"]));
        assert!(known_path(&["stacks", "1st1"]));
        assert!(!known_path(&["volumes"]));
    }
}
