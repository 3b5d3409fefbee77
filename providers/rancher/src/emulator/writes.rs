//! The write handlers: creating and deleting stacks, creating, updating,
//! deleting and acting on services, each with the validation Cattle does
//! (required fields, unique names, valid references, valid states).
//!
//! "Live" below means neither `removing` nor `removed`: only live objects
//! hold their name or can be linked to, so a load balancer deleted to change
//! its ports can be recreated under the same name at once, as upstream does.

use std::collections::BTreeMap;
use std::net::IpAddr;

use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::answer::{Answer, Failure};
use super::scope::{Scope, find};
use super::state::{Balancer, Kind, Store, public_port};
use super::transitions::{Action, Life, Phase};
use crate::cattle::{LaunchConfig, LbConfig, SetServiceLinksInput};

/// The body as a JSON object; an empty body is an empty object (actions
/// without input send none).
fn parse_body(body: &[u8]) -> Result<Map<String, Value>, Failure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Failure::unprocessable(
            "InvalidBodyContent",
            "the body must be a JSON object".to_owned(),
        )),
        Err(e) => Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "InvalidBodyContent",
            format!("the body is not JSON: {e}"),
        )),
    }
}

/// The non-empty string `field`.
fn required_str<'m>(map: &'m Map<String, Value>, field: &str) -> Result<&'m str, Failure> {
    match map.get(field) {
        None | Some(Value::Null) => Err(missing(field)),
        Some(Value::String(s)) if s.is_empty() => Err(missing(field)),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(invalid(field, &format!("not a string: {other}"))),
    }
}

/// `field` read as a `T`; `None` when absent or null.
fn optional<T: DeserializeOwned>(
    map: &Map<String, Value>,
    field: &str,
) -> Result<Option<T>, Failure> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value)
            .map(Some)
            .map_err(|e| invalid(field, &e.to_string())),
    }
}

fn missing(field: &str) -> Failure {
    Failure::unprocessable("MissingRequired", format!("{field} is required"))
}

fn invalid(field: &str, why: &str) -> Failure {
    Failure::unprocessable("InvalidOption", format!("{field}: {why}"))
}

fn bad_reference(field: &str, id: &str) -> Failure {
    Failure::unprocessable(
        "InvalidReference",
        format!("{field}: {id} is not an existing, live object"),
    )
}

fn not_unique(name: &str) -> Failure {
    Failure::unprocessable("NotUnique", format!("name: {name} is already in use"))
}

/// Cattle service names: letters, digits and hyphens (why upstream cleans
/// hostnames before naming external services after them).
fn check_service_name(name: &str) -> Result<(), Failure> {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        Ok(())
    } else {
        Err(Failure::unprocessable(
            "InvalidCharacters",
            format!("name: {name}: only letters, digits and '-' are allowed"),
        ))
    }
}

/// The stack and name of a new service, checked: the stack must be live
/// and the name free in it.
fn placement<'m>(
    store: &Store,
    map: &'m Map<String, Value>,
) -> Result<(&'m str, &'m str), Failure> {
    let name = required_str(map, "name")?;
    check_service_name(name)?;
    let stack_id = required_str(map, "stackId")?;
    if !store
        .stack(stack_id)
        .is_some_and(|s| s.life.phase().is_live())
    {
        return Err(bad_reference("stackId", stack_id));
    }
    if store.live_service_named(stack_id, name).is_some() {
        return Err(not_unique(name));
    }
    Ok((name, stack_id))
}

fn check_ports(launch_config: Option<&LaunchConfig>) -> Result<(), Failure> {
    let ports = launch_config
        .map(|c| c.ports.as_slice())
        .unwrap_or_default();
    match ports.iter().find(|p| public_port(p).is_none()) {
        Some(bad) => Err(invalid("launchConfig.ports", &format!("bad port {bad}"))),
        None => Ok(()),
    }
}

fn check_rules(store: &Store, lb_config: Option<&LbConfig>) -> Result<(), Failure> {
    let rules = lb_config
        .map(|c| c.port_rules.as_slice())
        .unwrap_or_default();
    for rule in rules.iter().filter(|r| !r.service_id.is_empty()) {
        if !is_live_service(store, &rule.service_id) {
            return Err(bad_reference(
                "lbConfig.portRules.serviceId",
                &rule.service_id,
            ));
        }
    }
    Ok(())
}

fn is_live_service(store: &Store, id: &str) -> bool {
    store.service(id).is_some_and(|s| s.life.phase().is_live())
}

fn external_ips(value: Option<&Value>) -> Result<Vec<String>, Failure> {
    const FIELD: &str = "externalIpAddresses";
    let Some(Value::Array(items)) = value else {
        return match value {
            None | Some(Value::Null) => Err(missing(FIELD)),
            Some(other) => Err(invalid(FIELD, &format!("not a list: {other}"))),
        };
    };
    if items.is_empty() {
        return Err(missing(FIELD));
    }
    items
        .iter()
        .map(|item| match item.as_str() {
            Some(s) if s.parse::<IpAddr>().is_ok() => Ok(s.to_owned()),
            _ => Err(invalid(FIELD, &format!("not an IP address: {item}"))),
        })
        .collect()
}

/// `POST /stacks`: active at once.
pub(super) fn create_stack(store: &mut Store, body: &[u8], now: Instant) -> Answer {
    let map = parse_body(body)?;
    let name = required_str(&map, "name")?;
    let external_id: Option<String> = optional(&map, "externalId")?;
    if store.live_stack_named(name).is_some() {
        return Err(not_unique(name));
    }
    let id = store.add_stack(name, external_id, now);
    let stack = store
        .stack(&id)
        .ok_or_else(|| Failure::server(format!("stack {id} vanished")))?;
    Ok((StatusCode::CREATED, store.stack_json(stack)))
}

/// `DELETE /stacks/{id}`: the stack and every live service in it start
/// removing.
pub(super) fn delete_stack(store: &mut Store, id: &str, now: Instant) -> Result<Value, Failure> {
    let stack = store
        .stack(id)
        .filter(|s| s.life.phase() != Phase::Removed)
        .ok_or_else(|| Failure::not_found(id))?;
    let (id, live) = (stack.id.clone(), stack.life.phase().is_live());
    if live {
        store.start_removing_stack(&id, now);
    }
    let stack = store
        .stack(&id)
        .ok_or_else(|| Failure::server(format!("stack {id} vanished")))?;
    Ok(store.stack_json(stack))
}

/// `POST /loadbalancerservices`: `registering`, then `inactive`.
pub(super) fn create_load_balancer(store: &mut Store, body: &[u8], now: Instant) -> Answer {
    let map = parse_body(body)?;
    let (name, stack_id) = placement(store, &map)?;
    let launch_config: Option<LaunchConfig> = optional(&map, "launchConfig")?;
    check_ports(launch_config.as_ref())?;
    let lb_config: Option<LbConfig> = optional(&map, "lbConfig")?;
    check_rules(store, lb_config.as_ref())?;
    let metadata: Option<BTreeMap<String, Value>> = optional(&map, "metadata")?;
    let life = Life::starting(Phase::Registering, now, store.transition_delay);
    let kind = Kind::LoadBalancer(Balancer {
        launch_config,
        lb_config,
        metadata,
        links: Vec::new(),
    });
    let id = store.add_service(name, stack_id, life, kind);
    created(store, &id, now)
}

/// `POST /externalservices`: `registering`, then `inactive`.
pub(super) fn create_external(store: &mut Store, body: &[u8], now: Instant) -> Answer {
    let map = parse_body(body)?;
    let (name, stack_id) = placement(store, &map)?;
    let ips = external_ips(map.get("externalIpAddresses"))?;
    let life = Life::starting(Phase::Registering, now, store.transition_delay);
    let id = store.add_service(name, stack_id, life, Kind::External { ips });
    created(store, &id, now)
}

fn created(store: &Store, id: &str, now: Instant) -> Answer {
    let service = store
        .service(id)
        .ok_or_else(|| Failure::server(format!("service {id} vanished")))?;
    Ok((StatusCode::CREATED, store.service_json(service, now)))
}

/// The service `id` as reached through `scope`, if it may still change:
/// 404 when absent or removed, 409 while it is being removed. Returns its
/// ID as stored.
fn changeable(store: &Store, scope: Scope, id: &str, what: &str) -> Result<String, Failure> {
    let service = find(store, scope, id)?;
    match service.life.phase() {
        Phase::Removed => Err(Failure::not_found(id)),
        Phase::Removing => Err(Failure::invalid_state(id, "removing", what)),
        _ => Ok(service.id.clone()),
    }
}

fn render(store: &Store, id: &str, now: Instant) -> Result<Value, Failure> {
    store
        .service(id)
        .map(|s| store.service_json(s, now))
        .ok_or_else(|| Failure::server(format!("service {id} vanished")))
}

/// `PUT /<services>/{id}`: a load balancer takes `lbConfig` and `metadata`
/// (each replaced whole; `null` clears it) and refuses `launchConfig`; an
/// external service takes `externalIpAddresses`. Other fields are ignored.
pub(super) fn update_service(
    store: &mut Store,
    scope: Scope,
    id: &str,
    body: &[u8],
    now: Instant,
) -> Result<Value, Failure> {
    let map = parse_body(body)?;
    let id = changeable(store, scope, id, "update")?;
    let is_balancer = store.service(&id).is_some_and(|s| s.balancer().is_some());
    if is_balancer {
        if map.get("launchConfig").is_some_and(|v| !v.is_null()) {
            return Err(invalid(
                "launchConfig",
                "a load balancer's ports cannot change in place: delete and recreate it",
            ));
        }
        // `None`: leave it; `Some(None)`: clear it.
        let lb_config: Option<Option<LbConfig>> = if map.contains_key("lbConfig") {
            Some(optional(&map, "lbConfig")?)
        } else {
            None
        };
        check_rules(store, lb_config.as_ref().and_then(Option::as_ref))?;
        let metadata: Option<Option<BTreeMap<String, Value>>> = if map.contains_key("metadata") {
            Some(optional(&map, "metadata")?)
        } else {
            None
        };
        if let Some(Kind::LoadBalancer(b)) = store.service_mut(&id).map(|s| &mut s.kind) {
            if let Some(lb_config) = lb_config {
                b.lb_config = lb_config;
            }
            if let Some(metadata) = metadata {
                b.metadata = metadata;
            }
        }
    } else if map.contains_key("externalIpAddresses") {
        let new_ips = external_ips(map.get("externalIpAddresses"))?;
        if let Some(Kind::External { ips }) = store.service_mut(&id).map(|s| &mut s.kind) {
            *ips = new_ips;
        }
    }
    render(store, &id, now)
}

/// `POST /<services>/{id}?action=<name>`: the action if the service's
/// state offers it (409 `InvalidState` otherwise); 422 `InvalidAction` for
/// an action its type does not have.
pub(super) fn service_action(
    store: &mut Store,
    scope: Scope,
    id: &str,
    name: &str,
    body: &[u8],
    now: Instant,
) -> Result<Value, Failure> {
    let service = find(store, scope, id)?;
    if service.life.phase() == Phase::Removed {
        return Err(Failure::not_found(id));
    }
    let (id, phase) = (service.id.clone(), service.life.phase());
    let is_balancer = service.balancer().is_some();
    // Action names are lower case; a client spelling one `setServiceLinks`
    // still means it.
    let action = Action::parse(&name.to_ascii_lowercase())
        .filter(|a| *a != Action::SetServiceLinks || is_balancer)
        .ok_or_else(|| {
            Failure::unprocessable(
                "InvalidAction",
                format!("{name} is not an action of {}", service.type_name()),
            )
        })?;
    if !action.allowed(phase, is_balancer) {
        return Err(Failure::invalid_state(&id, phase.as_str(), name));
    }
    let delay = store.transition_delay;
    match action {
        Action::Activate | Action::Deactivate => {
            let next = if action == Action::Activate {
                Phase::Activating
            } else {
                Phase::Deactivating
            };
            if let Some(service) = store.service_mut(&id) {
                service.life.enter(next, now, delay);
            }
        }
        Action::Remove => store.start_removing_service(&id, now),
        Action::SetServiceLinks => set_service_links(store, &id, body)?,
    }
    render(store, &id, now)
}

/// Replaces load balancer `id`'s links with the input's, each of which
/// must name a live service.
fn set_service_links(store: &mut Store, id: &str, body: &[u8]) -> Result<(), Failure> {
    let input: SetServiceLinksInput = serde_json::from_value(Value::Object(parse_body(body)?))
        .map_err(|e| invalid("serviceLinks", &e.to_string()))?;
    let mut links: Vec<String> = Vec::with_capacity(input.service_links.len());
    for link in input.service_links {
        if !is_live_service(store, &link.service_id) {
            return Err(bad_reference("serviceLinks.serviceId", &link.service_id));
        }
        if !links.contains(&link.service_id) {
            links.push(link.service_id);
        }
    }
    if let Some(Kind::LoadBalancer(b)) = store.service_mut(id).map(|s| &mut s.kind) {
        b.links = links;
    }
    Ok(())
}

/// `DELETE /<services>/{id}`: `removing`, then `removed`; a service already
/// being removed is answered as it is.
pub(super) fn delete_service(
    store: &mut Store,
    scope: Scope,
    id: &str,
    now: Instant,
) -> Result<Value, Failure> {
    let service = find(store, scope, id)?;
    let (id, phase) = (service.id.clone(), service.life.phase());
    match phase {
        Phase::Removed => return Err(Failure::not_found(&id)),
        Phase::Removing => {}
        _ => store.start_removing_service(&id, now),
    }
    render(store, &id, now)
}
