//! The provider as the app meets it: the factory, configuration, region,
//! capabilities, and the token kept secret.

use crate::support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use ccm_cloud_provider::{
    CloudConfig, CloudProvider, Environment, InitContext, Instances, LoadBalancer, ProviderFactory,
};
use ccm_provider_digitalocean::test_util::account;
use ccm_provider_digitalocean::{DigitalOceanProvider, DigitalOceanProviderFactory, Settings};
use support::{node, service};

#[test]
fn the_factory_needs_a_token_and_names_the_variable() {
    assert_eq!(DigitalOceanProviderFactory::NAME, "digitalocean");
    let err = DigitalOceanProviderFactory::build(None, &Environment::default()).unwrap_err();
    assert!(err.to_string().contains("DO_ACCESS_TOKEN"), "{err}");
}

#[test]
fn a_pace_too_slow_to_keep_is_refused_naming_the_variable() {
    let env = Environment::default()
        .with("DO_ACCESS_TOKEN", "t")
        .with("DO_API_RATE_LIMIT_QPS", "1e-12");
    let err = DigitalOceanProviderFactory::build(None, &env).unwrap_err();
    assert!(
        err.to_string()
            .contains("environment variable DO_API_RATE_LIMIT_QPS: 0.000000000001 calls a second"),
        "{err}"
    );
}

#[tokio::test]
async fn a_token_file_named_in_the_cloud_config_is_used() {
    let account = account();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{}\n", account.token)).unwrap();
    let config = CloudConfig::new(
        dir.path().join("cloud.toml"),
        format!("token_file = {:?}\n", token_file.display().to_string()),
    );
    let env = Environment::default()
        .with("DO_OVERRIDE_URL", &account.harness.prism_url)
        .with("REGION", "nyc3");

    let provider = DigitalOceanProviderFactory::build(Some(&config), &env).unwrap();
    provider.initialize(&InitContext::new("c1")).await.unwrap();

    assert_eq!(
        account.count("GET", "/v2/regions"),
        1,
        "authenticated with the file's token"
    );
}

#[test]
fn a_missing_token_file_names_the_key_and_the_config_not_a_value() {
    // A config error never quotes a value, a path neither: it names the
    // file and the key, and why.
    let config = CloudConfig::new("/etc/do.toml", "token_file = \"/nonexistent/do-token\"\n");
    let err =
        DigitalOceanProviderFactory::build(Some(&config), &Environment::default()).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains("/etc/do.toml")
            && shown.contains("token_file")
            && shown.contains("cannot read")
            && !shown.contains("/nonexistent/do-token"),
        "{shown}"
    );
}

#[tokio::test]
async fn capabilities_are_instances_and_load_balancers_without_routes() {
    let account = account();
    let plain = account.provider().await;
    assert_eq!(plain.provider_name(), "digitalocean");
    assert!(plain.instances().is_some());
    assert!(plain.load_balancer().is_some());
    assert!(
        plain.routes().is_none(),
        "DigitalOcean VPCs route pod traffic natively"
    );
    assert!(
        plain.has_cluster_id(),
        "no DO_CLUSTER_ID needed, as upstream: load balancers are the Service's by ID or UID-derived name"
    );
}

#[tokio::test]
async fn without_region_the_metadata_service_answers_it() {
    let account = account();
    let metadata = format!("{}/metadata/v1/region", account.harness.fake_url);
    let env = Environment::default()
        .with("DO_ACCESS_TOKEN", &account.token)
        .with("DO_OVERRIDE_URL", &account.harness.prism_url)
        .with("DO_METADATA_URL", &metadata);
    let provider = DigitalOceanProvider::new(Settings::from_env(None, &env).unwrap()).unwrap();

    provider.initialize(&InitContext::new("c1")).await.unwrap();

    assert_eq!(
        provider.region(),
        Some(ccm_provider_digitalocean::test_util::fake_api::METADATA_REGION)
    );
}

#[tokio::test]
async fn an_unknown_region_fails_initialization_naming_it() {
    let account = account();
    let settings = Settings::from_env(None, &account.env().with("REGION", "mars1")).unwrap();
    let provider = DigitalOceanProvider::new(settings).unwrap();

    let err = provider
        .initialize(&InitContext::new("c1"))
        .await
        .unwrap_err();

    assert!(err.to_string().contains("REGION=`mars1`"), "{err}");
}

#[tokio::test]
async fn load_balancers_need_an_initialized_region() {
    let account = account();
    let provider =
        DigitalOceanProvider::new(Settings::from_env(None, &account.env()).unwrap()).unwrap();
    let err = provider
        .ensure_load_balancer("c1", &service("web", "u", &[]), &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not initialized"), "{err}");
}

/// Collects everything the provider logs.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_token_never_appears_in_errors_logs_or_debug_output() {
    let account = account();
    account.add_droplets(2);
    let logs = Logs::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // With one scoped subscriber, tracing-core asks only the registering
    // thread's subscriber about a new call site: a call site another test's
    // thread reaches first would be disabled for good. A second registered
    // dispatcher makes it ask every one, this test's included; registering
    // it also recomputes the call sites already seen.
    let _every_dispatcher_asked = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new());

    let provider = account.provider().await;
    let mut shown = vec![format!("{provider:?}"), format!("{:?}", account.env())];
    let svc = service("web", "u-1", &[]);
    shown.push(format!(
        "{:?}",
        provider
            .ensure_load_balancer("c1", &svc, &[node("node-0", None)])
            .await
    ));
    shown.push(format!(
        "{:?}",
        provider
            .instance_metadata(&node("missing", Some("digitalocean://5")))
            .await
    ));
    account.throttle_next(1, 5);
    let throttled = provider
        .instance_exists(&node("node-1", None))
        .await
        .unwrap_err();
    shown.extend([format!("{throttled:?}"), throttled.to_string()]);
    // A token the API refuses: the 401's error.
    let refused = Settings::from_env(
        None,
        &account
            .env()
            .with("DO_ACCESS_TOKEN", "dop_v1_refusedsecret"),
    )
    .unwrap();
    let stranger = DigitalOceanProvider::new(refused).unwrap();
    let unauthorized = stranger
        .initialize(&InitContext::new("c1"))
        .await
        .unwrap_err();
    shown.extend([
        format!("{unauthorized:?}"),
        unauthorized.to_string(),
        format!("{stranger:?}"),
    ]);
    assert!(unauthorized.to_string().contains("401"), "{unauthorized}");

    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("DigitalOcean API request"),
        "the provider logs its calls: {logged}"
    );
    for text in shown.iter().chain([&logged]) {
        assert!(!text.contains(&account.token), "token leaked: {text}");
        assert!(!text.contains("refusedsecret"), "token leaked: {text}");
    }
}
