//! Test fixtures: a stateful fake of DigitalOcean's API behind a Prism proxy
//! that validates every request and response against DigitalOcean's
//! OpenAPI spec.
//!
//! Compiled for this crate's tests and, with the `test-util` feature, for
//! other crates' tests (the binary's end-to-end tests), so there is one copy
//! of the fake. Start with [`account`]: a fresh, empty account on the fake,
//! whose [`Account::env`] points a provider (or a CCM process) at Prism.
//!
//! One fake and one Prism serve a whole test binary, on a runtime of their
//! own (each `#[tokio::test]` has its own runtime, which ends with the
//! test); each test gets its own account through a fresh token.

pub mod fake_api;
pub mod prism;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use ccm_cloud_provider::{CloudProvider, Environment, InitContext};
use serde_json::Value;

use crate::{DigitalOceanProvider, Settings};
pub use fake_api::{
    AccountState, FakeApi, FakeDroplet, FakeFirewall, FakeLoadBalancer, FakeVolume, Recorded,
};

/// How long the fake and Prism may take to start on a busy 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The fake and the Prism in front of it.
#[derive(Debug)]
pub struct Harness {
    /// The fake's accounts.
    pub api: FakeApi,
    /// The fake itself, bypassing Prism.
    pub fake_url: String,
    /// Prism, validating, in front of the fake.
    pub prism_url: String,
    /// The Prism process.
    pub prism: prism::Prism,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();
static NEXT_ACCOUNT: AtomicU64 = AtomicU64::new(1);

/// The test binary's harness, started on first use.
///
/// # Panics
/// When the fake cannot bind a loopback port or Prism cannot start (the
/// message names `cargo xtask ci` when Prism is not installed).
pub fn harness() -> &'static Harness {
    HARNESS.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("fake-digitalocean".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("fake API runtime");
                runtime.block_on(async move {
                    let api = FakeApi::default();
                    let started = match api.serve().await {
                        Ok(fake_url) => prism::start(&fake_url)
                            .await
                            .map(|prism| Harness {
                                api,
                                fake_url,
                                prism_url: prism.url.clone(),
                                prism,
                            })
                            .map_err(|e| e.to_string()),
                        Err(e) => Err(format!("could not bind the fake API on 127.0.0.1: {e}")),
                    };
                    let failed = started.is_err();
                    let _ = tx.send(started);
                    if !failed {
                        // Serve until the test process exits.
                        std::future::pending::<()>().await;
                    }
                });
            })
            .expect("spawn the fake API thread");
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(harness)) => harness,
            Ok(Err(why)) => panic!("{why}"),
            Err(e) => panic!("the fake API and Prism did not start: {e}"),
        }
    })
}

/// A fresh, empty account on the fake.
pub fn account() -> Account {
    let harness = harness();
    let n = NEXT_ACCOUNT.fetch_add(1, Ordering::SeqCst);
    let token = format!("dop_v1_{:x}{n:04}supersecret", std::process::id());
    harness
        .api
        .lock()
        .insert(token.clone(), AccountState::default());
    Account { token, harness }
}

/// A test's view of its account on the fake.
#[derive(Debug, Clone)]
pub struct Account {
    /// The account's API token.
    pub token: String,
    /// The fake and Prism serving it.
    pub harness: &'static Harness,
}

impl Account {
    fn with<T>(&self, f: impl FnOnce(&mut AccountState) -> T) -> T {
        let mut accounts = self.harness.api.lock();
        f(accounts.get_mut(&self.token).expect("account exists"))
    }

    /// The provider's environment: this account's token, Prism as the API,
    /// region nyc3, and `DEFAULT_LB_TYPE=REGIONAL` (the suites were written
    /// for HTTP-aware load balancers; [`Account::upstream_env`] keeps
    /// upstream's `REGIONAL_NETWORK` default).
    pub fn env(&self) -> Environment {
        self.upstream_env().with("DEFAULT_LB_TYPE", "REGIONAL")
    }

    /// This account's token, Prism as the API, region nyc3, and nothing
    /// else: upstream's defaults.
    pub fn upstream_env(&self) -> Environment {
        Environment::default()
            .with("DO_ACCESS_TOKEN", &self.token)
            .with("DO_OVERRIDE_URL", &self.harness.prism_url)
            .with("REGION", "nyc3")
    }

    /// Stores an `active` load balancer made from `body` (a create body, as
    /// upstream's CCM would have sent it) and returns its ID.
    ///
    /// # Panics
    /// When `body` is not a valid create body.
    pub fn seed_load_balancer(&self, body: &Value) -> String {
        let body = fake_api::check_load_balancer_body(body).expect("a valid create body");
        self.with(|a| {
            let n = a.load_balancers.len() + 0xa00;
            let lb = FakeLoadBalancer {
                id: format!("5e0b5c1a-0000-4000-8000-{n:012x}"),
                ip: body
                    .ip
                    .clone()
                    .unwrap_or_else(|| format!("203.0.113.{}", n % 250 + 1)),
                body,
                status: "active".into(),
                reads_until_active: 0,
            };
            let id = lb.id.clone();
            a.load_balancers.insert(id.clone(), lb);
            id
        })
    }

    /// Adds a certificate (`kind` is `custom` or `lets_encrypt`).
    pub fn add_certificate(&self, id: &str, name: &str, kind: &str) {
        self.with(|a| {
            a.certificates.insert(
                id.to_owned(),
                fake_api::FakeCertificate {
                    name: name.to_owned(),
                    kind: kind.to_owned(),
                },
            )
        });
    }

    /// Removes certificate `id`.
    pub fn remove_certificate(&self, id: &str) {
        self.with(|a| a.certificates.remove(id));
    }

    /// Replaces the forwarding rules' certificate of the `index`th load
    /// balancer, as a Let's Encrypt renewal does.
    pub fn renew_certificate(&self, index: usize, new_id: &str) {
        self.with(|a| {
            let lb = a
                .load_balancers
                .values_mut()
                .nth(index)
                .expect("load balancer");
            for rule in &mut lb.body.forwarding_rules {
                if rule
                    .get("certificate_id")
                    .is_some_and(|c| c.as_str() != Some(""))
                {
                    rule["certificate_id"] = Value::from(new_id);
                }
            }
        });
    }

    /// [`env`](Self::env) with the fake itself as the API, bypassing Prism:
    /// for the tag endpoint, whose published spec leaves out the
    /// `load_balancer` resource type that upstream's godo sends and the
    /// real API accepts, so Prism refuses the request.
    pub fn env_bypassing_prism(&self) -> Environment {
        self.env().with("DO_OVERRIDE_URL", &self.harness.fake_url)
    }

    /// An initialized provider for `env`.
    ///
    /// # Panics
    /// When `env` is not valid or initialization fails.
    pub async fn provider_with(&self, env: &Environment) -> DigitalOceanProvider {
        let settings = Settings::from_env(None, env).expect("valid settings");
        let provider = DigitalOceanProvider::new(settings).expect("provider");
        provider
            .initialize(&InitContext::new("test-cluster"))
            .await
            .expect("initialize against the fake");
        provider
    }

    /// An initialized provider for this account.
    pub async fn provider(&self) -> DigitalOceanProvider {
        self.provider_with(&self.env()).await
    }

    /// Adds (or replaces) a droplet.
    pub fn add_droplet(&self, droplet: FakeDroplet) {
        self.with(|a| a.droplets.insert(droplet.id, droplet));
    }

    /// `count` droplets `node-<i>` with IDs from 1000.
    pub fn add_droplets(&self, count: u64) {
        for i in 0..count {
            self.add_droplet(FakeDroplet::new(1000 + i, &format!("node-{i}")));
        }
    }

    /// Adds (or replaces) a block storage volume `id` (a UUID) in `region`.
    pub fn add_volume(&self, id: &str, region: &str) {
        self.with(|a| a.volumes.insert(id.to_owned(), FakeVolume::new(id, region)));
    }

    /// Sets the status (`new`, `active`, `off`, `archive`) of droplet `id`.
    pub fn set_droplet_status(&self, id: u64, status: &str) {
        self.with(|a| a.droplets.get_mut(&id).expect("droplet").status = status.to_owned());
    }

    /// Deletes droplet `id`.
    pub fn remove_droplet(&self, id: u64) {
        self.with(|a| a.droplets.remove(&id));
    }

    /// Every load balancer as the API renders it, in ID order.
    pub fn load_balancers(&self) -> Vec<Value> {
        self.with(|a| a.load_balancers.values().map(|lb| lb.to_json()).collect())
    }

    /// Replaces the tags of the `index`th load balancer (in ID order).
    pub fn set_load_balancer_tags(&self, index: usize, tags: &[&str]) {
        self.with(|a| {
            a.load_balancers
                .values_mut()
                .nth(index)
                .expect("load balancer")
                .body
                .tags = Some(tags.iter().map(|t| (*t).to_owned()).collect());
        });
    }

    /// Every firewall as the API renders it, in ID order.
    pub fn firewalls(&self) -> Vec<Value> {
        self.with(|a| a.firewalls.values().map(FakeFirewall::to_json).collect())
    }

    /// Changes the stored body of the first firewall, as someone might by
    /// hand.
    pub fn edit_firewall(&self, edit: impl FnOnce(&mut Value)) {
        self.with(|a| edit(&mut a.firewalls.values_mut().next().expect("firewall").body));
    }

    /// Deletes every firewall, as someone might by hand.
    pub fn remove_firewalls(&self) {
        self.with(|a| a.firewalls.clear());
    }

    /// Sets the status of the `index`th load balancer (in ID order).
    pub fn set_load_balancer_status(&self, index: usize, status: &str) {
        self.with(|a| {
            a.load_balancers
                .values_mut()
                .nth(index)
                .expect("load balancer")
                .status = status.to_owned();
        });
    }

    /// How many reads a new load balancer answers `new` before it turns
    /// `active` (default 1; 0 creates it active).
    pub fn set_activate_after_reads(&self, reads: u32) {
        self.with(|a| a.activate_after_reads = reads);
    }

    /// Limits the account to `limit` load balancers: a create beyond it is
    /// refused as DigitalOcean refuses it.
    pub fn set_load_balancer_limit(&self, limit: usize) {
        self.with(|a| a.load_balancer_limit = Some(limit));
    }

    /// The next `calls` requests answer 429, naming a reset `reset_in`
    /// seconds away.
    pub fn throttle_next(&self, calls: u32, reset_in: u64) {
        self.with(|a| {
            a.throttle_next = calls;
            a.throttle_reset_in = reset_in;
        });
    }

    /// While `on`, every request answers 429, as DigitalOcean answers an
    /// account over its limit, naming a reset one second away (so that a
    /// client honouring `RateLimit-Reset` is let through soon after the
    /// limit lifts); off again answers normally.
    pub fn set_throttled(&self, on: bool) {
        if on {
            self.throttle_next(u32::MAX, 1);
        } else {
            self.with(|a| a.throttle_next = 0);
        }
    }

    /// Requests left in the hour, reported in `RateLimit-Remaining`.
    pub fn set_remaining(&self, remaining: u64) {
        self.with(|a| a.remaining = remaining);
    }

    /// Breaks (or repairs) the droplet representation, for response-contract
    /// tests.
    pub fn corrupt_droplets(&self, on: bool) {
        self.with(|a| a.corrupt_droplets = on);
    }

    /// Requests the fake answered (those Prism refused never arrive).
    pub fn requests(&self) -> Vec<Recorded> {
        self.with(|a| a.requests.clone())
    }

    /// How many requests the fake answered, without copying them.
    pub fn request_count(&self) -> usize {
        self.with(|a| a.requests.len())
    }

    /// Forgets the requests answered so far.
    pub fn clear_requests(&self) {
        self.with(|a| a.requests.clear());
    }

    /// How many requests changed something.
    pub fn mutations(&self) -> usize {
        self.requests().iter().filter(|r| r.is_mutation()).count()
    }

    /// How many `method` requests went to exactly `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }
}
