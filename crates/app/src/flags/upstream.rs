//! What upstream's `cloud-controller-manager` accepts, as data generated from
//! its Go source by `cargo xtask upstream-flags` (`upstream-flags.json`
//! beside this crate's Cargo.toml): every flag by section, and the feature
//! gates with their defaults, for each release it covers.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

/// The generated file, compiled in.
const DATA: &str = include_str!("../../upstream-flags.json");

/// The generated file.
#[derive(Debug, Deserialize)]
pub(crate) struct Upstream {
    /// Upstream's releases it was generated from, oldest first.
    pub(crate) releases: Vec<Release>,
}

/// One upstream release's flags and gates.
#[derive(Debug, Deserialize)]
pub(crate) struct Release {
    /// The Go module and version, such as `k8s.io/cloud-provider v0.37.2`.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the upstream-flags tests")
    )]
    pub(crate) source: String,
    pub(crate) sections: Vec<Section>,
    pub(crate) feature_gates: Vec<Gate>,
}

/// One `--help` section.
#[derive(Debug, Deserialize)]
pub(crate) struct Section {
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the upstream-flags tests")
    )]
    pub(crate) name: String,
    pub(crate) flags: Vec<Flag>,
}

/// One flag as pflag describes it.
#[derive(Debug, Deserialize)]
pub(crate) struct Flag {
    pub(crate) name: String,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the upstream-flags tests")
    )]
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the upstream-flags tests")
    )]
    #[serde(rename = "default")]
    pub(crate) default_value: String,
    #[serde(default)]
    pub(crate) deprecated: Option<String>,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "read by the upstream-flags tests")
    )]
    #[serde(default)]
    pub(crate) hidden: bool,
}

/// One feature gate.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Gate {
    pub(crate) name: String,
    #[serde(rename = "default")]
    pub(crate) enabled_by_default: bool,
    /// `ALPHA`, `BETA`, `DEPRECATED`, or empty for GA.
    pub(crate) stage: String,
    #[serde(default)]
    pub(crate) lock_to_default: bool,
}

/// The compiled-in data.
pub(crate) fn upstream() -> &'static Upstream {
    static PARSED: OnceLock<Upstream> = OnceLock::new();
    PARSED.get_or_init(|| {
        #[expect(
            clippy::expect_used,
            reason = "compiled-in data, checked by this module's tests"
        )]
        serde_json::from_str(DATA).expect("upstream-flags.json is valid")
    })
}

/// Every gate any covered release knows, each with its newest release's
/// default and stage, locked only where no covered release takes the other
/// value: a setting one supported release accepts is accepted.
pub(crate) fn gates() -> BTreeMap<&'static str, Gate> {
    let mut gates: BTreeMap<&'static str, Gate> = BTreeMap::new();
    for release in &upstream().releases {
        for gate in &release.feature_gates {
            let older_takes_other = gates.get(gate.name.as_str()).is_some_and(|older| {
                !older.lock_to_default || older.enabled_by_default != gate.enabled_by_default
            });
            let mut spec = gate.clone();
            spec.lock_to_default &= !older_takes_other;
            gates.insert(gate.name.as_str(), spec);
        }
    }
    gates
}

/// Upstream's deprecation text for `flag`, if a covered release deprecates it.
pub(crate) fn deprecation(flag: &str) -> Option<&'static str> {
    upstream()
        .releases
        .iter()
        .rev()
        .flat_map(|r| &r.sections)
        .flat_map(|s| &s.flags)
        .find(|f| f.name == flag && f.deprecated.is_some())
        .and_then(|f| f.deprecated.as_deref())
}
