//! Tags as the fake API creates them, answers for them and tags resources
//! with them (`POST /v2/tags`, `GET /v2/tags/{tag_id}`,
//! `POST /v2/tags/{tag_id}/resources`). A tagged load
//! balancer or droplet carries the tag, so it renders it.
//!
//! Tagging answers 404 for a tag that does not exist, as upstream's tags
//! syncer expects. It accepts the `load_balancer` resource type upstream's
//! godo sends, which DigitalOcean's published spec leaves out of
//! `resource_type` (Prism refuses it; the real API takes it).

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{AccountState, not_found, parse_body, unprocessable};

const RESOURCE_TYPES: &[&str] = &[
    "droplet",
    "image",
    "volume",
    "volume_snapshot",
    "load_balancer",
];

/// Whether `tag` exists: created, or carried by a resource (creating a
/// load balancer or droplet with a tag creates it).
fn exists(account: &AccountState, tag: &str) -> bool {
    let owned = tag.to_owned();
    account.tags.contains(tag)
        || account
            .load_balancers
            .values()
            .any(|lb| lb.body.tags.as_ref().is_some_and(|t| t.contains(&owned)))
        || account.droplets.values().any(|d| d.tags.contains(&owned))
}

fn is_tag_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':'))
}

/// `POST /v2/tags`.
pub(super) fn create(account: &mut AccountState, body: &[u8]) -> (StatusCode, Value) {
    let raw = match parse_body(body) {
        Ok(raw) => raw,
        Err(problems) => return unprocessable(&problems),
    };
    let Some(name) = raw
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| is_tag_name(n))
    else {
        return unprocessable(&["body.name: required tag name".to_owned()]);
    };
    account.tags.insert(name.to_owned());
    (
        StatusCode::CREATED,
        json!({"tag": {"name": name, "resources": {"count": 0, "last_tagged_uri": ""}}}),
    )
}

/// `GET /v2/tags/{tag}`: 404 for a tag that does not exist.
pub(super) fn get(account: &AccountState, tag: &str) -> (StatusCode, Value) {
    if !exists(account, tag) {
        return not_found();
    }
    (
        StatusCode::OK,
        json!({"tag": {"name": tag, "resources": {"count": 0, "last_tagged_uri": ""}}}),
    )
}

/// `POST /v2/tags/{tag}/resources`.
pub(super) fn tag_resources(
    account: &mut AccountState,
    tag: &str,
    body: &[u8],
) -> (StatusCode, Value) {
    let resources = match parse_body(body).and_then(|raw| resources(&raw)) {
        Ok(r) => r,
        Err(problems) => return unprocessable(&problems),
    };
    if !exists(account, tag) {
        return not_found();
    }
    for (id, kind) in &resources {
        let tags = match kind.as_str() {
            "load_balancer" => account
                .load_balancers
                .get_mut(id)
                .map(|lb| lb.body.tags.get_or_insert_with(Vec::new)),
            "droplet" => id
                .parse()
                .ok()
                .and_then(|id: u64| account.droplets.get_mut(&id))
                .map(|d| &mut d.tags),
            _ => None,
        };
        let Some(tags) = tags else {
            return not_found();
        };
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_owned());
        }
    }
    (StatusCode::NO_CONTENT, Value::Null)
}

fn resources(raw: &Value) -> Result<Vec<(String, String)>, Vec<String>> {
    let Some(items) = raw.get("resources").and_then(Value::as_array) else {
        return Err(vec!["body.resources: required array".to_owned()]);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let id = r.get("resource_id").and_then(Value::as_str);
            let kind = r
                .get("resource_type")
                .and_then(Value::as_str)
                .filter(|k| RESOURCE_TYPES.contains(k));
            match (id, kind) {
                (Some(id), Some(kind)) => Ok((id.to_owned(), kind.to_owned())),
                _ => Err(vec![format!(
                    "body.resources[{i}]: resource_id (string) and resource_type ({}) required",
                    RESOURCE_TYPES.join(", ")
                )]),
            }
        })
        .collect()
}
