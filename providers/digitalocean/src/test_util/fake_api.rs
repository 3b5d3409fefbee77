//! A stateful fake of DigitalOcean's API v2, serving on 127.0.0.1: the
//! droplet, load-balancer, firewall, tag and volume endpoints the provider calls, pagination,
//! rate-limit headers and 429s.
//!
//! Each API token is its own account, so tests share one server (and one
//! Prism in front of it) without seeing each other's droplets.
//!
//! Its checks are its own, written from the spec, not borrowed from the
//! provider: a provider bug must not be mirrored by the fake.

mod droplets;
mod firewalls;
mod load_balancers;
mod tags;
mod volumes;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::{Mutex, MutexGuard};
use serde_json::{Value, json};

pub use droplets::{FakeDroplet, region_json};
pub use firewalls::FakeFirewall;
pub(crate) use load_balancers::check_body as check_load_balancer_body;
pub use load_balancers::{FakeLoadBalancer, LoadBalancerBody};
use load_balancers::{check_body, check_update};
pub use volumes::FakeVolume;

/// The region the fake metadata service answers.
pub const METADATA_REGION: &str = "sfo3";
const REGIONS: &[&str] = &["nyc3", "sfo3", "ams3"];
const HOURLY_LIMIT: u64 = 5000;

/// One request the fake answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// The path, such as `/v2/load_balancers`.
    pub path: String,
    /// The query string, without `?`.
    pub query: String,
}

impl Recorded {
    /// Whether the request could change something (anything but a GET).
    pub fn is_mutation(&self) -> bool {
        self.method != "GET"
    }
}

/// One account's state: what a token sees and how the fake treats it.
#[derive(Debug)]
pub struct AccountState {
    /// Droplets by ID.
    pub droplets: BTreeMap<u64, FakeDroplet>,
    /// Load balancers by ID.
    pub load_balancers: BTreeMap<String, FakeLoadBalancer>,
    /// Certificates by ID.
    pub certificates: BTreeMap<String, FakeCertificate>,
    /// Firewalls by ID.
    pub firewalls: BTreeMap<String, FakeFirewall>,
    /// Tags created with `POST /v2/tags`.
    pub tags: BTreeSet<String>,
    /// Block storage volumes by ID.
    pub volumes: BTreeMap<String, FakeVolume>,
    /// Every request the fake answered for this account, oldest first.
    pub requests: Vec<Recorded>,
    /// Reads of a new load balancer before it turns active; 0 creates it active.
    pub activate_after_reads: u32,
    /// How many load balancers the account may have; `None` is no limit.
    pub load_balancer_limit: Option<usize>,
    /// The next this-many requests answer 429.
    pub throttle_next: u32,
    /// Seconds from now the 429's `RateLimit-Reset` names.
    pub throttle_reset_in: u64,
    /// Requests left in the hour, reported in `RateLimit-Remaining`.
    pub remaining: u64,
    /// Break the droplet representation (for response-contract tests).
    pub corrupt_droplets: bool,
    next_lb: u64,
    /// Counts every firewall created, so a deleted one's ID is never reused.
    next_firewall: u64,
}

impl Default for AccountState {
    fn default() -> Self {
        Self {
            droplets: BTreeMap::new(),
            load_balancers: BTreeMap::new(),
            certificates: BTreeMap::new(),
            firewalls: BTreeMap::new(),
            tags: BTreeSet::new(),
            volumes: BTreeMap::new(),
            requests: Vec::new(),
            activate_after_reads: 1,
            load_balancer_limit: None,
            throttle_next: 0,
            throttle_reset_in: 30,
            remaining: HOURLY_LIMIT,
            corrupt_droplets: false,
            next_lb: 0,
            next_firewall: 0,
        }
    }
}

/// A certificate: what the provider reads of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeCertificate {
    /// Its name.
    pub name: String,
    /// `custom` or `lets_encrypt`.
    pub kind: String,
}

fn certificate_json(id: &str, c: &FakeCertificate) -> Value {
    json!({"id": id, "name": c.name, "type": c.kind, "state": "verified",
        "created_at": "2024-01-15T10:00:00Z", "sha1_fingerprint": "dfcc9f57d86bf58e321c2c6c31c7a971be244ac7",
        "not_after": "2027-01-15T10:00:00Z"})
}

/// The fake API: all accounts, by token. Clones share the accounts.
#[derive(Debug, Clone, Default)]
pub struct FakeApi {
    accounts: Arc<Mutex<HashMap<String, AccountState>>>,
}

impl FakeApi {
    /// Every account, by token, to inspect or change.
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, AccountState>> {
        self.accounts.lock()
    }

    /// Serves the fake on 127.0.0.1 from the current runtime; returns its
    /// base URL.
    pub async fn serve(&self) -> std::io::Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(self.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(format!("http://{addr}"))
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn error(status: StatusCode, id: &str, message: &str) -> (StatusCode, Value) {
    (status, json!({"id": id, "message": message}))
}

async fn handle(
    State(api): State<FakeApi>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if uri.path() == "/metadata/v1/region" {
        return METADATA_REGION.into_response();
    }
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let mut accounts = api.lock();
    let Some(account) = accounts.get_mut(&token) else {
        let (status, body) = error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unable to authenticate you.",
        );
        return (status, axum::Json(body)).into_response();
    };
    account.requests.push(Recorded {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
    });
    account.remaining = account.remaining.saturating_sub(1);
    if account.throttle_next > 0 {
        account.throttle_next -= 1;
        let reset = now_secs() + account.throttle_reset_in;
        let (status, body) = error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_requests",
            "API rate limit exceeded.",
        );
        let mut response = (status, axum::Json(body)).into_response();
        set_rate_headers(response.headers_mut(), 0, reset);
        return response;
    }
    let (status, body) = route(account, &method, uri.path(), &query, &body);
    let remaining = account.remaining;
    drop(accounts);
    let mut response = if status == StatusCode::NO_CONTENT {
        status.into_response()
    } else {
        (status, axum::Json(body)).into_response()
    };
    set_rate_headers(response.headers_mut(), remaining, now_secs() + 60);
    response
}

fn set_rate_headers(headers: &mut HeaderMap, remaining: u64, reset: u64) {
    for (name, value) in [
        ("ratelimit-limit", HOURLY_LIMIT),
        ("ratelimit-remaining", remaining),
        ("ratelimit-reset", reset),
    ] {
        headers.insert(name, HeaderValue::from(value));
    }
}

fn route(
    account: &mut AccountState,
    method: &Method,
    path: &str,
    query: &HashMap<String, String>,
    body: &[u8],
) -> (StatusCode, Value) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["v2", "regions"]) => {
            let all = REGIONS.iter().map(|r| region_json(r)).collect();
            paginate(all, "regions", path, query)
        }
        ("GET", ["v2", "droplets"]) => {
            let name = query.get("name");
            let tag = query.get("tag_name");
            let all = account
                .droplets
                .values()
                .filter(|d| name.is_none_or(|n| &d.name == n))
                .filter(|d| tag.is_none_or(|t| d.tags.contains(t)))
                .map(|d| droplet_json(account.corrupt_droplets, d))
                .collect();
            paginate(all, "droplets", path, query)
        }
        ("GET", ["v2", "droplets", id]) => match id
            .parse()
            .ok()
            .and_then(|id: u64| account.droplets.get(&id))
        {
            Some(d) => (
                StatusCode::OK,
                json!({"droplet": droplet_json(account.corrupt_droplets, d)}),
            ),
            None => not_found(),
        },
        ("GET", ["v2", "load_balancers"]) => {
            let seq = account.next_lb;
            let all = account
                .load_balancers
                .values_mut()
                .map(|lb| {
                    lb.observe(|| format!("192.0.2.{}", seq % 250 + 1));
                    lb.to_json()
                })
                .collect();
            paginate(all, "load_balancers", path, query)
        }
        ("POST", ["v2", "load_balancers"]) => create_load_balancer(account, body),
        ("GET", ["v2", "load_balancers", id]) => {
            let seq = account.next_lb;
            match account.load_balancers.get_mut(*id) {
                Some(lb) => {
                    lb.observe(|| format!("192.0.2.{}", seq % 250 + 1));
                    (StatusCode::OK, json!({"load_balancer": lb.to_json()}))
                }
                None => not_found(),
            }
        }
        ("PUT", ["v2", "load_balancers", id]) => {
            match parse_body(body).and_then(|raw| check_body(&raw)) {
                Err(problems) => unprocessable(&problems),
                Ok(new) => match account.load_balancers.get_mut(*id) {
                    Some(lb) => match check_update(&lb.body, &new) {
                        Err(problems) => unprocessable(&problems),
                        Ok(()) => {
                            lb.body = new;
                            (StatusCode::OK, json!({"load_balancer": lb.to_json()}))
                        }
                    },
                    None => not_found(),
                },
            }
        }
        ("GET", ["v2", "certificates"]) => {
            let name = query.get("name");
            let all = account
                .certificates
                .iter()
                .filter(|(_, c)| name.is_none_or(|n| &c.name == n))
                .map(|(id, c)| certificate_json(id, c))
                .collect();
            paginate(all, "certificates", path, query)
        }
        ("GET", ["v2", "certificates", id]) => match account.certificates.get(*id) {
            Some(c) => (
                StatusCode::OK,
                json!({"certificate": certificate_json(id, c)}),
            ),
            None => not_found(),
        },
        ("DELETE", ["v2", "load_balancers", id]) => match account.load_balancers.remove(*id) {
            Some(_) => (StatusCode::NO_CONTENT, Value::Null),
            None => not_found(),
        },
        (m @ ("POST" | "DELETE"), ["v2", "load_balancers", id, "droplets"]) => {
            let ids = match parse_body(body).and_then(|raw| droplet_ids(&raw)) {
                Ok(ids) => ids,
                Err(problems) => return unprocessable(&problems),
            };
            let Some(lb) = account.load_balancers.get_mut(*id) else {
                return not_found();
            };
            let current = lb.body.droplet_ids.get_or_insert_with(Vec::new);
            if m == "POST" {
                current.extend(
                    ids.iter()
                        .filter(|i| !current.contains(i))
                        .copied()
                        .collect::<Vec<_>>(),
                );
            } else {
                current.retain(|i| !ids.contains(i));
            }
            (StatusCode::NO_CONTENT, Value::Null)
        }
        ("GET", ["v2", "firewalls"]) => firewalls::list(account, path, query),
        ("POST", ["v2", "firewalls"]) => firewalls::create(account, body),
        ("GET", ["v2", "firewalls", id]) => firewalls::get(account, id),
        ("PUT", ["v2", "firewalls", id]) => firewalls::update(account, id, body),
        ("DELETE", ["v2", "firewalls", id]) => firewalls::delete(account, id),
        ("POST", ["v2", "tags"]) => tags::create(account, body),
        ("GET", ["v2", "tags", tag]) => tags::get(account, tag),
        ("GET", ["v2", "volumes", id]) => volumes::get(account, id),
        ("POST", ["v2", "tags", tag, "resources"]) => tags::tag_resources(account, tag, body),
        _ => not_found(),
    }
}

fn create_load_balancer(account: &mut AccountState, body: &[u8]) -> (StatusCode, Value) {
    let new = match parse_body(body).and_then(|raw| check_body(&raw)) {
        Ok(b) => b,
        Err(problems) => return unprocessable(&problems),
    };
    if let Some(limit) = account.load_balancer_limit
        && account.load_balancers.len() >= limit
    {
        // As DigitalOcean refuses it: a 429 with no spent rate limit. The
        // spec documents no such answer; the message is the real API's.
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_requests",
            &format!(
                "You have reached your load balancer limit, maximum allowed {limit}. \
                 Please contact support to raise your load balancer limit."
            ),
        );
    }
    account.next_lb += 1;
    let n = account.next_lb;
    let mut lb = FakeLoadBalancer {
        id: format!("4de7ac8b-495b-4884-9a69-{n:012x}"),
        // A reserved IP is the address from the start.
        ip: new.ip.clone().unwrap_or_default(),
        body: new,
        status: "new".into(),
        reads_until_active: account.activate_after_reads,
    };
    if lb.reads_until_active == 0 {
        lb.status = "active".into();
        if lb.ip.is_empty() {
            lb.ip = format!("192.0.2.{}", n % 250 + 1);
        }
    }
    let rendered = lb.to_json();
    account.load_balancers.insert(lb.id.clone(), lb);
    (StatusCode::ACCEPTED, json!({"load_balancer": rendered}))
}

fn droplet_json(corrupt: bool, d: &FakeDroplet) -> Value {
    let mut v = d.to_json();
    if corrupt {
        // An ID as a string: the spec says integer.
        v["id"] = json!(d.id.to_string());
    }
    v
}

fn parse_body(body: &[u8]) -> Result<Value, Vec<String>> {
    serde_json::from_slice(body).map_err(|e| vec![format!("body is not JSON: {e}")])
}

fn droplet_ids(raw: &Value) -> Result<Vec<u64>, Vec<String>> {
    raw.get("droplet_ids")
        .and_then(Value::as_array)
        .and_then(|ids| ids.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
        .ok_or_else(|| vec!["body.droplet_ids: required array of integers".to_owned()])
}

fn not_found() -> (StatusCode, Value) {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        "The resource you requested could not be found.",
    )
}

fn unprocessable(problems: &[String]) -> (StatusCode, Value) {
    error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unprocessable_entity",
        &problems.join("; "),
    )
}

/// One page of `all`, with the API's `links` and `meta`.
fn paginate(
    all: Vec<Value>,
    key: &str,
    path: &str,
    query: &HashMap<String, String>,
) -> (StatusCode, Value) {
    let number =
        |name: &str, default: usize| query.get(name).map_or(Ok(default), |v| v.parse::<usize>());
    let (Ok(page), Ok(per_page)) = (number("page", 1), number("per_page", 20)) else {
        return unprocessable(&["page and per_page must be integers".to_owned()]);
    };
    if page < 1 || !(1..=200).contains(&per_page) {
        return unprocessable(&["page must be at least 1 and per_page from 1 to 200".to_owned()]);
    }
    let total = all.len();
    let last = total.div_ceil(per_page).max(1);
    let items: Vec<Value> = all
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let link =
        |p: usize| format!("https://api.digitalocean.com{path}?page={p}&per_page={per_page}");
    let mut pages = serde_json::Map::new();
    if page > 1 {
        pages.insert("first".into(), json!(link(1)));
        pages.insert("prev".into(), json!(link(page - 1)));
    }
    if page < last {
        pages.insert("next".into(), json!(link(page + 1)));
        pages.insert("last".into(), json!(link(last)));
    }
    (
        StatusCode::OK,
        json!({key: items, "links": {"pages": pages}, "meta": {"total": total}}),
    )
}
