//! Fuzz targets for the parsers that read what users and clusters hand the
//! cloud-controller-manager: Service annotations, cloud configs, flags, Go
//! durations, and the test API server's label selectors and strategic merge
//! patches.
//!
//! Start with [`TARGETS`]: one function per target takes the fuzzer's bytes
//! (as UTF-8 where the parser reads text; other input is skipped), feeds
//! them to the real parser and asserts only that it does not panic, plus a
//! cheap property where one is natural (a Go duration formats and parses
//! back to itself).
//!
//! The nightly cargo-fuzz crate in `fuzz/` wraps each function in a
//! libFuzzer binary of the same name, and `cargo xtask chaos` runs them for
//! a bounded time. This crate's tests replay the committed corpus
//! (`fuzz/corpus/<target>/`) on stable, so the targets and their seeds keep
//! compiling and passing under `cargo test --workspace`.

mod objects;
mod service;

use std::time::Duration;

use cloud_provider::{CloudConfig, Environment, ProviderFactory};
use provider_aws::{AwsConfig, AwsProviderFactory};
use provider_digitalocean::LoadBalancerType;
use provider_fake::FakeProviderFactory;
use serde_json::{Map, Value};

/// One fuzz target: its name (the cargo-fuzz binary and the corpus
/// directory) and the function the fuzzer calls.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    Target {
        name: "aws_annotations",
        run: aws_annotations,
    },
    Target {
        name: "digitalocean_annotations",
        run: digitalocean_annotations,
    },
    Target {
        name: "admission_review",
        run: admission_review,
    },
    Target {
        name: "aws_cloud_config",
        run: aws_cloud_config,
    },
    Target {
        name: "fake_cloud_config",
        run: fake_cloud_config,
    },
    Target {
        name: "flags",
        run: flags,
    },
    Target {
        name: "go_duration",
        run: go_duration,
    },
    Target {
        name: "label_selector",
        run: label_selector,
    },
    Target {
        name: "strategic_merge_patch",
        run: strategic_merge_patch,
    },
];

/// An AdmissionReview as the API server posts it to the webhook, answered
/// for the fake cloud: a review or a 400, never a panic. A review that is
/// answered must carry its request's uid.
pub fn admission_review(data: &[u8]) {
    static CLOUD: std::sync::LazyLock<provider_fake::FakeCloud> =
        std::sync::LazyLock::new(provider_fake::FakeCloud::default);
    if let Ok(answer) = ccm_app::fuzzing::admission_review(&*CLOUD, data) {
        let sent: Value = serde_json::from_slice(data).expect("answered, so it parsed");
        let answer: Value = serde_json::from_str(&answer).expect("the answer is JSON");
        assert_eq!(answer["response"]["uid"], sent["request"]["uid"]);
    }
}

/// Where a cloud config is read from, for error messages.
const CLOUD_CONFIG_PATH: &str = "/etc/kubernetes/cloud.conf";

/// A Service of type LoadBalancer whose annotations (and a few spec fields)
/// are the input's `key=value` lines (see [`service::from_lines`]), checked
/// as the AWS provider checks it before its first call.
pub fn aws_annotations(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = provider_aws::annotations::check_service(&service::from_lines(text));
}

/// [`aws_annotations`] for the DigitalOcean provider, once for each type a
/// Service that names none would get.
pub fn digitalocean_annotations(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let service = service::from_lines(text);
    for default_type in [
        LoadBalancerType::Regional,
        LoadBalancerType::RegionalNetwork,
    ] {
        let _ = provider_digitalocean::annotations::check_service(&service, default_type);
    }
}

/// An AWS INI cloud config, parsed and built into a provider as the
/// binary's start-up does (no I/O happens before `initialize`).
pub fn aws_cloud_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = CloudConfig::new(CLOUD_CONFIG_PATH, text);
    if let Ok(config) = AwsConfig::parse(&file) {
        let _ = (config.region(), config.cluster_id());
    }
    let _ = AwsProviderFactory::build(Some(&file), &Environment::default());
}

/// The fake provider's TOML cloud config, parsed and built into a cloud.
pub fn fake_cloud_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = CloudConfig::new(CLOUD_CONFIG_PATH, text);
    let _ = FakeProviderFactory::build(Some(&file), &Environment::default());
}

/// A command line, split into words at whitespace, parsed and validated as
/// the AWS binary (which adds its own controllers' flags) parses it,
/// without starting anything.
pub fn flags(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let args = std::iter::once("aws-cloud-controller-manager")
        .chain(text.split_whitespace())
        .map(str::to_owned)
        .collect();
    let _ = ccm_app::fuzzing::check_flags::<AwsProviderFactory>(args);
}

/// A Go duration, both ways: the input as text must parse to what it prints
/// as (Go's `Duration.String()`) parses to; its first eight bytes, as a
/// duration within Go's range, must print as what parses back to it.
pub fn go_duration(data: &[u8]) {
    if let Some(bytes) = data.first_chunk::<8>() {
        let nanos = u64::from_le_bytes(*bytes) % GO_DURATIONS;
        let duration = Duration::from_nanos(nanos);
        let printed = ccm_app::fuzzing::format_go_duration(duration);
        assert_eq!(
            ccm_app::fuzzing::parse_go_duration(&printed),
            Ok(duration),
            "{nanos} ns printed as `{printed}`"
        );
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = ccm_app::fuzzing::parse_go_duration(text) else {
        return;
    };
    let printed = ccm_app::fuzzing::format_go_duration(parsed);
    let reparsed: Result<Duration, String> = ccm_app::fuzzing::parse_go_duration(&printed);
    assert_eq!(
        reparsed,
        Ok(parsed),
        "`{text}` parsed as {parsed:?}, printed as `{printed}`"
    );
}

/// How many durations Go has from zero: 0 to 2^63 - 1 ns.
const GO_DURATIONS: u64 = 1 << 63;

/// A `labelSelector` (the first line) matched against labels: the other
/// lines as `key=value`, or a Deployment's usual labels when there are
/// none.
pub fn label_selector(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (selector, rest) = text.split_once('\n').unwrap_or((text, ""));
    let mut labels: Map<String, Value> = rest
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
        .collect();
    if labels.is_empty() {
        labels = objects::labels();
    }
    let _ = test_apiserver::fuzzing::label_selector_matches(selector, &labels);
}

/// A strategic merge patch (after a first line naming the kind: `Node`,
/// `Service`, `Pod`...) applied to a realistic object of that kind, and to
/// an empty one. What applies is still an object.
pub fn strategic_merge_patch(data: &[u8]) {
    let (kind, body) = match data.iter().position(|b| *b == b'\n') {
        Some(end) => (&data[..end], &data[end + 1..]),
        None => (data, &[][..]),
    };
    let Ok(kind) = std::str::from_utf8(kind) else {
        return;
    };
    let kind = kind.trim();
    for current in [objects::of_kind(kind), Value::Object(Map::new())] {
        if let Some(Ok(patched)) =
            test_apiserver::fuzzing::strategic_merge_patch(kind, current, body)
        {
            assert!(
                patched.is_object(),
                "a patched {kind} is not an object: {patched}"
            );
        }
    }
}

#[cfg(test)]
mod tests;
