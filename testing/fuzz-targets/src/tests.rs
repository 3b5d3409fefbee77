//! The targets reach their parsers' success paths from the committed
//! seeds: a harness that broke every input early would fuzz nothing.

use std::path::{Path, PathBuf};

use super::*;

fn seed(target: &str, name: &str) -> String {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn annotation_seeds_make_services_the_providers_accept() {
    for name in ["nlb-minimal", "nlb-tls", "nlb-healthcheck", "nlb-udp"] {
        let service = service::from_lines(&seed("aws_annotations", name));
        let checked = ccm_provider_aws::check_service(&service);
        assert!(checked.is_ok(), "{name}: {checked:?}");
    }
    for name in [
        "minimal",
        "https-certificate",
        "healthcheck",
        "sticky-sessions",
    ] {
        let service = service::from_lines(&seed("digitalocean_annotations", name));
        let checked =
            ccm_provider_digitalocean::check_service(&service, LoadBalancerType::Regional);
        assert!(checked.is_ok(), "{name}: {checked:?}");
    }
}

#[test]
fn cloud_config_seeds_parse() {
    for name in ["global", "service-override", "quoted-escapes"] {
        let file = CloudConfig::new(CLOUD_CONFIG_PATH, seed("aws_cloud_config", name));
        let parsed = AwsConfig::parse(&file);
        assert!(parsed.is_ok(), "{name}: {parsed:?}");
    }
    for name in ["settings", "instances", "volumes"] {
        let file = CloudConfig::new(CLOUD_CONFIG_PATH, seed("fake_cloud_config", name));
        let parsed = ccm_provider_fake::FakeConfig::parse(&file);
        assert!(parsed.is_ok(), "{name}: {parsed:?}");
    }
}

#[test]
fn flag_seeds_parse() {
    for name in ["typical", "durations", "cidrs", "tagging", "help"] {
        let args = std::iter::once("aws-cloud-controller-manager".to_owned())
            .chain(seed("flags", name).split_whitespace().map(str::to_owned))
            .collect();
        let parsed = ccm_app::fuzzing::check_flags::<AwsProviderFactory>(args);
        assert!(parsed.is_ok(), "{name}: {parsed:?}");
    }
}

#[test]
fn selector_and_patch_seeds_apply() {
    let selected = ccm_test_apiserver::fuzzing::label_selector_matches(
        &seed("label_selector", "in-notin"),
        &serde_json::json!({"a": "b", "e": "g"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    assert_eq!(selected, Ok(true));
    let text = seed("strategic_merge_patch", "node-delete-condition");
    let (kind, body) = text.split_once('\n').unwrap_or_default();
    let patched = ccm_test_apiserver::fuzzing::strategic_merge_patch(
        kind,
        objects::of_kind(kind),
        body.as_bytes(),
    );
    let conditions = patched
        .and_then(Result::ok)
        .and_then(|node| node.pointer("/status/conditions").cloned());
    assert_eq!(
        conditions,
        Some(serde_json::json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]))
    );
}

#[test]
fn marked_gcfg_seeds_reach_the_parsers_success_and_error_paths() {
    let valid = mark_values(&seed("gcfg_errors", "valid"));
    let config = AwsConfig::parse(&CloudConfig::new(CLOUD_CONFIG_PATH, valid.as_str()));
    let zone = config.as_ref().ok().and_then(|c| c.zone.clone());
    assert!(
        zone.is_some_and(|z| z.ends_with(VALUE_MARK)),
        "marked values stay valid and carry the mark: {config:?}"
    );
    for (name, line) in [
        ("typo-beside-secret", 3),
        ("unterminated-quote", 2),
        ("unknown-escape", 2),
        ("outside-section", 1),
    ] {
        let marked = mark_values(&seed("gcfg_errors", name));
        let err = gcfg::parse(&marked).expect_err(name);
        assert_eq!(err.line(), line, "{name}: {err}");
    }
}

#[test]
fn delay_seeds_are_read_as_delays() {
    let now = UNIX_EPOCH + Duration::from_secs(784_111_777);
    for (name, delay) in [
        ("seconds", Duration::from_secs(120)),
        ("http-date", Duration::ZERO),
        ("rfc850-date", Duration::ZERO),
        ("asctime-date", Duration::ZERO),
        ("http-date-far-future", MAX_SERVER_DELAY),
        ("seconds-overflow", MAX_SERVER_DELAY),
        ("fractional-seconds", Duration::from_millis(1500)),
    ] {
        let parsed = server_delay::parse_retry_after(&seed("server_delay", name), now);
        assert_eq!(parsed, Some(delay), "{name}");
    }
    assert_eq!(
        server_delay::parse_retry_after(&seed("server_delay", "nan"), now),
        None
    );
    assert_eq!(
        server_delay::until_unix_time(&seed("server_delay", "ratelimit-reset"), now),
        Some(MAX_SERVER_DELAY)
    );
}

#[test]
fn certificate_request_seeds_reach_both_readings() {
    let read = |name| {
        ccm_controllers::fuzzing::kubelet_serving_request(
            seed("kubelet_serving_request", name).as_bytes(),
        )
    };
    let good = read("well-formed").expect("the well-formed seed is read");
    assert_eq!(good.dns_names, ["a.example"]);
    for name in ["end-label-mismatch", "trailing-block"] {
        assert!(read(name).is_err(), "{name} is refused");
    }
}
