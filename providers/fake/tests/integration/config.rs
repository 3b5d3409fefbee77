//! The cloud-config file: seeding, settings, and errors that name the field.

use crate::support;

use ccm_cloud_provider::{
    CloudConfig, CloudError, Environment, Instances, NodeAddressType, ProviderFactory,
};
use ccm_provider_fake::{FakeConfig, FakeProviderFactory, InstanceState};
use support::{node, node_with_provider_id};

const FULL: &str = r#"
[settings]
latency_ms = 5
error_rate = 0.0
rate_limit_qps = 20.0
rate_limit_burst = 40
batch_size = 50
auto_instances = false

[[instances]]
name = "node-1"
provider_id = "fake:///zone-a/i-1"
instance_type = "fake.large"
zone = "zone-a"
region = "region-1"
addresses = [
  { type = "InternalIP", address = "10.0.0.1" },
  { type = "InternalIP", address = "fd00::1" },
  { type = "Hostname", address = "node-1.internal" },
]
labels = { "fake.example/rack" = "r7" }

[[instances]]
name = "node-2"
state = "stopped"
"#;

fn parse(text: &str) -> Result<FakeConfig, String> {
    FakeConfig::parse(&CloudConfig::new("/etc/kubernetes/cloud.conf", text))
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn seeded_instances_and_settings_come_from_the_file() {
    let config = parse(FULL).unwrap();
    assert_eq!(config.settings.batch_size, 50);
    assert_eq!(config.settings.rate_limit_burst, Some(40));
    let cloud = ccm_provider_fake::FakeCloud::new(config);

    let md = cloud
        .instance_metadata(&node_with_provider_id("node-1", "fake:///zone-a/i-1"))
        .await
        .unwrap();
    assert_eq!(md.instance_type, "fake.large");
    assert_eq!(
        (md.zone.as_str(), md.region.as_str()),
        ("zone-a", "region-1")
    );
    let kinds: Vec<_> = md
        .node_addresses
        .iter()
        .map(|a| (a.kind, a.address.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (NodeAddressType::InternalIp, "10.0.0.1"),
            (NodeAddressType::InternalIp, "fd00::1"),
            (NodeAddressType::Hostname, "node-1.internal"),
        ],
        "addresses keep the file's order (dual-stack order matters)"
    );
    assert_eq!(
        md.additional_labels
            .get("fake.example/rack")
            .map(String::as_str),
        Some("r7")
    );

    // Defaults: provider ID from the name, stopped state honoured.
    let n2 = cloud.instance("node-2").unwrap();
    assert_eq!(n2.provider_id, "fake://node-2");
    assert_eq!(n2.state, InstanceState::Stopped);
    assert!(cloud.instance_shutdown(&node("node-2")).await.unwrap());
    // Without auto_instances, an unknown node has no instance.
    assert!(matches!(
        cloud.instance_metadata(&node("node-9")).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(!cloud.instance_exists(&node("node-9")).await.unwrap());
}

#[tokio::test]
async fn auto_instances_answers_for_any_node_name() {
    let cloud =
        ccm_provider_fake::FakeCloud::new(parse("[settings]\nauto_instances = true\n").unwrap());
    let md = cloud.instance_metadata(&node("anything-7")).await.unwrap();
    assert_eq!(md.provider_id, "fake://anything-7");
    assert!(
        md.node_addresses
            .iter()
            .any(|a| a.kind == NodeAddressType::InternalIp)
    );
    // Once synthesized, the instance is found by its provider ID too.
    assert!(
        cloud
            .instance_exists(&node_with_provider_id("anything-7", "fake://anything-7"))
            .await
            .unwrap()
    );
    // A foreign provider ID is never synthesized.
    assert!(
        !cloud
            .instance_exists(&node_with_provider_id("x", "aws:///zone/i-1"))
            .await
            .unwrap()
    );
}

#[test]
fn factory_builds_from_the_file_or_defaults() {
    let env = Environment::default();
    let provider = FakeProviderFactory::build(None, &env).unwrap();
    assert_eq!(provider.provider_name(), "fake");
    let file = CloudConfig::new("cloud.conf", FULL);
    assert!(FakeProviderFactory::build(Some(&file), &env).is_ok());
}

#[test]
fn unknown_field_is_named_with_its_line() {
    let err = parse("[settings]\nlatncy_ms = 5\n").unwrap_err();
    assert!(err.starts_with("/etc/kubernetes/cloud.conf:2: "), "{err}");
    assert!(err.contains("latncy_ms"), "{err}");
    assert!(!err.contains('\n'), "one line: {err}");
}

#[test]
fn value_of_the_wrong_type_names_the_field() {
    let err = parse("[settings]\nlatency_ms = \"fast\"\n").unwrap_err();
    assert!(
        err.contains(":2: ") && err.contains("settings.latency_ms"),
        "{err}"
    );
}

#[test]
fn out_of_range_settings_name_the_field() {
    for (text, field) in [
        ("[settings]\nerror_rate = 1.5\n", "settings.error_rate"),
        ("[settings]\nbatch_size = 0\n", "settings.batch_size"),
        (
            "[settings]\nlatency_ms = 18446744073709551615\n",
            "settings.latency_ms",
        ),
        (
            "[settings]\nrate_limit_qps = -1.0\n",
            "settings.rate_limit_qps",
        ),
        (
            "[settings]\nrate_limit_qps = 1e-12\n",
            "settings.rate_limit_qps",
        ),
        (
            "[[instances]]\nname = \"a\"\naddresses = [{ type = \"InternalIp\", address = \"1.2.3.4\" }]\n",
            "instances[0].addresses[0].type",
        ),
        (
            "[[instances]]\nname = \"a\"\n[[instances]]\nname = \"a\"\n",
            "instances[1].name",
        ),
    ] {
        let err = parse(text).unwrap_err();
        assert!(err.contains(field), "expected {field} in: {err}");
    }
}

/// Values carrying a marker, wrong in every way the parser and the
/// checks refuse: the error names the field and never shows the value.
#[test]
fn no_error_shows_a_value() {
    const MARK: &str = "hunter2";
    for text in [
        "[settings]\nlatency_ms = \"hunter2\"\n",
        "[settings]\nzones = \"hunter2\"\n",
        "[settings]\nregion = \"hunter2\\q\"\n",
        "[settings]\nregion = \"hunter2\n",
        "[settings]\nregion = hunter2\n",
        "[settings]\nhunter2\n",
        "[[instances]]\nname = \"a\"\nstate = \"hunter2\"\n",
        "[[instances]]\nname = \"hunter2\"\n[[instances]]\nname = \"hunter2\"\n",
        "[[instances]]\nname = \"a\"\nprovider_id = \"hunter2\"\n[[instances]]\nname = \"b\"\nprovider_id = \"hunter2\"\n",
        "[[instances]]\nname = \"a\"\naddresses = [{ type = \"hunter2\", address = \"1.2.3.4\" }]\n",
        "[[volumes]]\nid = \"hunter2\"\n[[volumes]]\nid = \"hunter2\"\n",
        "[server]\nurl = \"http://hunter2:1\"\n",
        "[server]\nurl = \"https://hunter2\"\n",
        "[server]\nurl = \"http://10.0.0.1:1/hunter2\"\n",
    ] {
        let err = parse(text).unwrap_err();
        assert!(!err.contains(MARK), "{text:?}: {err}");
    }
}

#[test]
fn missing_required_field_is_named() {
    let err = parse("[[instances]]\nzone = \"z\"\n").unwrap_err();
    assert!(err.contains(":1: instances: missing field `name`"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn latency_and_rate_limit_from_the_file_take_effect() {
    let config = parse(
        r#"
[settings]
latency_ms = 250
rate_limit_qps = 1.0
rate_limit_burst = 2
auto_instances = true
"#,
    )
    .unwrap();
    let cloud = ccm_provider_fake::FakeCloud::new(config);

    let started = tokio::time::Instant::now();
    cloud.instance_metadata(&node("a")).await.unwrap();
    assert_eq!(started.elapsed(), std::time::Duration::from_millis(250));

    cloud.instance_metadata(&node("b")).await.unwrap();
    let third = cloud.instance_metadata(&node("c")).await;
    assert!(
        matches!(third, Err(CloudError::Throttled { .. })),
        "a burst of 2 at 1 call/s throttles the third call: {third:?}"
    );
}
