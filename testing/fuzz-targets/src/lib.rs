//! Fuzz targets for the parsers that read what users, clusters and cloud
//! APIs hand the cloud-controller-manager: Service annotations, cloud
//! configs (and that their errors never show a value), flags, Go durations,
//! the delays servers ask for, and the test API server's label selectors and
//! strategic merge patches.
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

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ccm_cloud_provider::server_delay::{self, MAX_SERVER_DELAY};
use ccm_cloud_provider::{CloudConfig, CloudError, Environment, ProviderFactory, gcfg};
use ccm_provider_aws::{AwsConfig, AwsProviderFactory};
use ccm_provider_digitalocean::LoadBalancerType;
use ccm_provider_fake::FakeProviderFactory;
use ccm_test_support::csr_referee::{CsrReferee, OurReading};
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
        name: "gcfg_errors",
        run: gcfg_errors,
    },
    Target {
        name: "server_delay",
        run: server_delay,
    },
    Target {
        name: "kubelet_serving_request",
        run: kubelet_serving_request,
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
    static CLOUD: std::sync::LazyLock<ccm_provider_fake::FakeCloud> =
        std::sync::LazyLock::new(ccm_provider_fake::FakeCloud::default);
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
    let _ = ccm_provider_aws::check_service(&service::from_lines(text));
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
        let _ = ccm_provider_digitalocean::check_service(&service, default_type);
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

/// What no config error may show: it is put into every value of the input
/// (after removing it from the input), so it can only reach a message
/// through a value. No gcfg name can hold it.
pub const VALUE_MARK: char = '\u{1F511}';

/// The input with [`VALUE_MARK`] put into every value: at the end of each
/// line that is not a header or a comment, where it ends the value (unless
/// a comment holds it) and leaves an AWS value as valid as it was. A line
/// without `=` becomes a bad line, as a wrapped value would.
pub fn mark_values(text: &str) -> String {
    text.replace(VALUE_MARK, "")
        .split_inclusive('\n')
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.trim_end().is_empty() || trimmed.starts_with(['[', ';', '#']) {
                return line.to_owned();
            }
            let body = line.trim_end_matches(['\r', '\n']);
            format!("{body}{VALUE_MARK}{}", &line[body.len()..])
        })
        .collect()
}

/// A gcfg (INI) cloud config whose values all carry [`VALUE_MARK`]: neither
/// the parser's errors nor the AWS provider's show it, and a parser error
/// names a line of the input.
pub fn gcfg_errors(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let marked = mark_values(text);
    if let Err(err) = gcfg::parse(&marked) {
        let (shown, debug) = (err.to_string(), format!("{err:?}"));
        assert!(
            !shown.contains(VALUE_MARK) && !debug.contains(VALUE_MARK),
            "a gcfg error shows a value: {debug}"
        );
        assert!(
            (1..=marked.lines().count()).contains(&err.line()),
            "line {} of {}: {shown}",
            err.line(),
            marked.lines().count()
        );
    }
    if let Err(err) = AwsConfig::parse(&CloudConfig::new(CLOUD_CONFIG_PATH, marked)) {
        let shown = err.to_string();
        assert!(
            !shown.contains(VALUE_MARK),
            "an AWS config error shows a value: {shown}"
        );
    }
}

/// A delay a server asks for, in every form it reaches us: the input as a
/// `Retry-After` (seconds or HTTP-date) and a `RateLimit-Reset`, its first
/// bytes as the clock, as fractional seconds and as a duration. No form
/// panics, and none comes out longer than [`MAX_SERVER_DELAY`].
pub fn server_delay(data: &[u8]) {
    let word = |i: usize| {
        data.get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    // Any clock up to the year 2286.
    let now = UNIX_EPOCH + Duration::from_secs(word(0) % 10_000_000_000);
    let within = |what: &str, delay: Duration| {
        assert!(delay <= MAX_SERVER_DELAY, "{what}: {delay:?}");
    };
    if let Some(delay) = server_delay::delay_from_secs_f64(f64::from_bits(word(1))) {
        within("seconds as f64", delay);
    }
    let nanos = u32::try_from(word(3) % 1_000_000_000).unwrap_or_default();
    let duration = Duration::new(word(2), nanos);
    within("clamped", server_delay::clamp_delay(duration));
    let deadline = server_delay::deadline_after(now, duration);
    within(
        "deadline",
        deadline.duration_since(now).unwrap_or(Duration::MAX),
    );
    within(
        "until a time",
        server_delay::until(
            now.checked_add(duration).unwrap_or(SystemTime::UNIX_EPOCH),
            now,
        ),
    );
    for err in [
        CloudError::Throttled {
            retry_after: duration,
        },
        CloudError::Retry {
            after: duration,
            reason: String::new(),
        },
    ] {
        within("requested", err.requested_delay().unwrap_or_default());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(delay) = server_delay::parse_retry_after(text, now) {
        within("Retry-After", delay);
    }
    if let Some(delay) = server_delay::until_unix_time(text, now) {
        within("RateLimit-Reset", delay);
    }
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
    let _ = ccm_test_apiserver::fuzzing::label_selector_matches(selector, &labels);
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
            ccm_test_apiserver::fuzzing::strategic_merge_patch(kind, current, body)
        {
            assert!(
                patched.is_object(),
                "a patched {kind} is not an object: {patched}"
            );
        }
    }
}

/// A kubelet serving certificate request (`spec.request`), read as the
/// CSR approver reads it: never a panic, at most one common name, and the
/// same reading twice. With `CCM_FUZZ_GO_REFEREE=1` it is also read by Go
/// (test-support's `CsrReferee`: `encoding/pem` and `crypto/x509`), and a
/// request the approver would judge must read the same in Go.
pub fn kubelet_serving_request(data: &[u8]) {
    let ours = ccm_controllers::fuzzing::kubelet_serving_request(data);
    assert_eq!(
        ours,
        ccm_controllers::fuzzing::kubelet_serving_request(data)
    );
    let Ok(reading) = ours else {
        return;
    };
    assert!(reading.common_names.len() <= 1, "{reading:?}");
    let Some(referee) = &*REFEREE else {
        return;
    };
    let judged = reading
        .common_names
        .first()
        .is_some_and(|cn| cn.starts_with("system:node:"))
        && reading.organizations == ["system:nodes"]
        && reading.emails.is_empty()
        && reading.uris.is_empty()
        && reading.other_names.is_empty()
        && !(reading.dns_names.is_empty() && reading.ip_addresses.is_empty());
    if !judged {
        return;
    }
    let go = referee
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .read(data)
        .expect("the referee answers");
    let ours = OurReading {
        common_names: &reading.common_names,
        organizations: &reading.organizations,
        dns_names: &reading.dns_names,
        ip_addresses: &reading.ip_addresses,
        emails: &reading.emails,
        uris: &reading.uris,
    };
    if let Err(diff) = go.agrees_with(ours) {
        panic!("the approver would judge a request Go reads otherwise: {diff}");
    }
}

/// Go's reader, when `CCM_FUZZ_GO_REFEREE=1` asks for it.
static REFEREE: std::sync::LazyLock<Option<std::sync::Mutex<CsrReferee>>> =
    std::sync::LazyLock::new(|| {
        (std::env::var_os("CCM_FUZZ_GO_REFEREE").is_some_and(|v| v == "1")).then(|| {
            std::sync::Mutex::new(CsrReferee::start().expect("the Go referee builds and starts"))
        })
    });

#[cfg(test)]
mod tests;
