//! `--feature-gates`, with component-base's syntax and rules over upstream's
//! gate names and defaults (from the generated data in [`super::upstream`]).

use std::collections::BTreeMap;

use super::parse_bool;
use super::upstream::{self, Gate};

/// Gates that change something here; any other gate a user sets is logged
/// once as having no effect.
const HONOURED: [&str; 3] = [
    super::route_period::WATCH_BASED_ROUTES,
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
];

/// The effective gates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeatureGates {
    enabled: BTreeMap<String, bool>,
}

impl FeatureGates {
    /// Whether gate `name` is on (false for a gate upstream does not know).
    pub(crate) fn enabled(&self, name: &str) -> bool {
        self.enabled.get(name).copied().unwrap_or(false)
    }
}

/// Parses `--feature-gates` as component-base's `featureGate.Set` does.
/// Returns the effective gates and the lines to log once at startup.
pub(crate) fn parse(text: &str) -> Result<(FeatureGates, Vec<String>), String> {
    let known = upstream::gates();
    let mut set: BTreeMap<&str, bool> = BTreeMap::new();
    for item in text.split(',').filter(|s| !s.is_empty()) {
        let (name, value) = match item.split_once('=') {
            Some((name, value)) => (name.trim(), value.trim()),
            None => {
                return Err(format!(
                    "--feature-gates: missing bool value for {}",
                    item.trim()
                ));
            }
        };
        let value = parse_bool(value).map_err(|_| {
            format!("--feature-gates: invalid value of {name}={value}; expected true or false")
        })?;
        if !known.contains_key(name) {
            return Err(format!(
                "--feature-gates: unrecognized feature gate: {name}"
            ));
        }
        set.insert(name, value);
    }
    let mut enabled: BTreeMap<String, bool> = known
        .iter()
        .map(|(name, gate)| ((*name).to_owned(), gate.enabled_by_default))
        .collect();
    let mut notes = Vec::new();
    for (name, value) in &set {
        let gate: &Gate = &known[name];
        if gate.lock_to_default && gate.enabled_by_default != *value {
            return Err(format!(
                "--feature-gates: cannot set feature gate {name} to {value}, feature is locked to {}",
                gate.enabled_by_default
            ));
        }
        match *name {
            "AllAlpha" | "AllBeta" => {
                let stage = if *name == "AllAlpha" { "ALPHA" } else { "BETA" };
                for (other, spec) in &known {
                    if spec.stage == stage && !set.contains_key(other) && !spec.lock_to_default {
                        enabled.insert((*other).to_owned(), *value);
                    }
                }
            }
            _ => {}
        }
        enabled.insert((*name).to_owned(), *value);
        match gate.stage.as_str() {
            "DEPRECATED" => notes.push(format!(
                "Setting deprecated feature gate {name}={value}. It will be removed in a future release."
            )),
            "" => notes.push(format!(
                "Setting GA feature gate {name}={value}. It will be removed in a future release."
            )),
            _ => {}
        }
        if !HONOURED.contains(name) {
            notes.push(format!(
                "--feature-gates: {name}={value} has no effect here: it gates code of upstream's Go libraries that this CCM does not have"
            ));
        }
    }
    Ok((FeatureGates { enabled }, notes))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn defaults_are_upstreams() {
        let (gates, notes) = parse("").unwrap();
        assert!(gates.enabled("LoggingBetaOptions"));
        assert!(!gates.enabled("LoggingAlphaOptions"));
        assert!(notes.is_empty());
    }

    #[test]
    fn setting_gates_follows_component_base() {
        let (gates, notes) = parse("LoggingAlphaOptions=true,LoggingBetaOptions=false").unwrap();
        assert!(gates.enabled("LoggingAlphaOptions") && !gates.enabled("LoggingBetaOptions"));
        assert!(notes.is_empty(), "both change logging here: {notes:?}");
        let (gates, _) = parse("AllAlpha=true").unwrap();
        assert!(
            gates.enabled("LoggingAlphaOptions"),
            "AllAlpha turns on alpha gates"
        );
        let (_, notes) = parse("WatchList=true").unwrap();
        assert!(
            notes[0].contains("WatchList=true has no effect here"),
            "{notes:?}"
        );
    }

    #[test]
    fn bad_gates_are_refused_as_upstream_words_it() {
        assert_eq!(
            parse("NoSuchGate=true").unwrap_err(),
            "--feature-gates: unrecognized feature gate: NoSuchGate"
        );
        assert_eq!(
            parse("WatchList").unwrap_err(),
            "--feature-gates: missing bool value for WatchList"
        );
        assert!(
            parse("WatchList=maybe")
                .unwrap_err()
                .contains("invalid value of WatchList=maybe")
        );
        assert!(
            parse("AggregatedDiscoveryRemoveBetaType=false")
                .unwrap_err()
                .contains(
                    "cannot set feature gate AggregatedDiscoveryRemoveBetaType to false, feature is locked to true"
                )
        );
    }

    #[test]
    fn a_value_an_older_supported_release_takes_is_accepted() {
        // 1.35 takes both values; 1.36 and 1.37 lock it to true.
        let (gates, notes) = parse("DeclarativeValidation=false").unwrap();
        assert!(!gates.enabled("DeclarativeValidation"));
        assert!(
            notes
                .iter()
                .any(|n| n.contains("DeclarativeValidation=false has no effect here")),
            "{notes:?}"
        );
    }

    #[test]
    fn gates_every_supported_release_dropped_are_refused() {
        // Removed before 1.35, the oldest supported release.
        assert_eq!(
            parse("ComponentSLIs=true").unwrap_err(),
            "--feature-gates: unrecognized feature gate: ComponentSLIs"
        );
    }

    #[test]
    fn deprecated_gates_warn_with_upstreams_words() {
        let (_, notes) = parse("KMSv1=true").unwrap();
        assert!(notes.iter().any(|n| n == "Setting deprecated feature gate KMSv1=true. It will be removed in a future release."));
    }
}
