//! Helpers for providers that read their settings from Service annotations:
//! each provider's annotations described once ([`AnnotationSchema`]), with
//! what upstream's CCM does when one is at fault ([`Upstream`]), and
//! warnings about keys they do not know, with the nearest key they do.

mod finding;
mod schema;
mod upstream;

use std::collections::BTreeMap;

pub use finding::{Finding, FindingKind};
pub use schema::{Agreement, Annotation, AnnotationSchema, Value, parse_bool};
pub use upstream::{Meaning, UNKNOWN_KEY, Upstream, UpstreamVerdict};

use crate::LoadBalancerWarning;

/// The reason of the warnings [`unknown_annotation_warnings`] makes.
pub const UNKNOWN_ANNOTATION: &str = "UnknownAnnotation";

/// The most edits (insertions, deletions, substitutions, swaps of two
/// neighbours) between a typo and the key it was meant to be.
const MAX_DISTANCE: usize = 2;

/// The longest key quoted in a warning, in bytes: with the nearest key and
/// the words around them a message stays under 1 KiB.
const MAX_QUOTED_BYTES: usize = 400;

/// The key in `known` nearest to `key`, if one is close enough to be a typo
/// of it: at most 2 edits away (a transposition counts as one), and at most
/// one edit per 4 characters of `key`, so short unrelated keys do not
/// match. Ties go to the first in `known`; `key` itself is never an answer.
pub fn nearest_key<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let bound = MAX_DISTANCE.min(key.chars().count() / 4);
    known
        .iter()
        .filter(|candidate| **candidate != key)
        .filter(|candidate| candidate.len().abs_diff(key.len()) <= bound * 4)
        .map(|candidate| (strsim::damerau_levenshtein(key, candidate), *candidate))
        .filter(|(distance, _)| *distance <= bound)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// One [`UNKNOWN_ANNOTATION`] warning for each annotation key that starts
/// with one of `prefixes` (the provider's own namespace, such as
/// `service.beta.kubernetes.io/do-loadbalancer-`) but is not in `known`,
/// in key order. The message names the key, says it is ignored and, when
/// one is close, suggests the nearest known key. Long keys are cut so each
/// message stays under 1 KiB.
///
/// A provider returns these in [`crate::EnsuredLoadBalancer::warnings`]: a
/// typo is reported without failing the ensure.
pub fn unknown_annotation_warnings(
    annotations: Option<&BTreeMap<String, String>>,
    prefixes: &[&str],
    known: &[&str],
) -> Vec<LoadBalancerWarning> {
    annotations
        .into_iter()
        .flat_map(BTreeMap::keys)
        .filter(|key| prefixes.iter().any(|p| key.starts_with(p)))
        .filter(|key| !known.contains(&key.as_str()))
        .map(|key| {
            let mut message = format!(
                "Unknown annotation \"{}\" is ignored",
                quoted(key, MAX_QUOTED_BYTES)
            );
            if let Some(nearest) = nearest_key(key, known) {
                message.push_str(&format!(
                    "; did you mean \"{}\"?",
                    quoted(nearest, MAX_QUOTED_BYTES)
                ));
            }
            LoadBalancerWarning::new(UNKNOWN_ANNOTATION, message)
        })
        .collect()
}

/// `text` cut to at most `max` bytes on a character boundary, ending in
/// `...` when cut.
fn quoted(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "service.beta.kubernetes.io/do-loadbalancer-";
    const KNOWN: &[&str] = &[
        "service.beta.kubernetes.io/do-loadbalancer-protocol",
        "service.beta.kubernetes.io/do-loadbalancer-healthcheck-path",
        "service.beta.kubernetes.io/do-loadbalancer-name",
        "service.beta.kubernetes.io/do-loadbalancer-size-unit",
        "service.beta.kubernetes.io/do-loadbalancer-tls-ports",
    ];

    fn key(suffix: &str) -> String {
        format!("{PREFIX}{suffix}")
    }

    fn annotations(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter()
            .map(|k| ((*k).to_owned(), "x".to_owned()))
            .collect()
    }

    #[test]
    fn typos_find_the_key_they_were_meant_to_be() {
        for (typo, meant) in [
            ("protocl", "protocol"),
            ("helthcheck-path", "healthcheck-path"),
            ("healthcheck-pth", "healthcheck-path"),
            ("protocol ", "protocol"),
            ("protcool", "protocol"),
            ("tls-port", "tls-ports"),
        ] {
            assert_eq!(
                nearest_key(&key(typo), KNOWN),
                Some(key(meant).as_str()),
                "{typo}"
            );
        }
    }

    #[test]
    fn unrelated_keys_find_nothing() {
        for unrelated in ["enable-proxy-protocol", "mode", "sticky-sessions-type", ""] {
            assert_eq!(nearest_key(&key(unrelated), KNOWN), None, "{unrelated}");
        }
        assert_eq!(nearest_key("ab", &["cd", "ax"]), None, "short keys");
    }

    #[test]
    fn a_known_key_is_not_its_own_nearest() {
        assert_eq!(nearest_key(KNOWN[0], &KNOWN[..1]), None);
    }

    #[test]
    fn unknown_keys_under_the_prefixes_warn_with_a_suggestion() {
        let typo = key("protocl");
        let unrelated = key("frobnicate");
        let given = annotations(&[
            &typo,
            &unrelated,
            KNOWN[0],
            "example.com/owner",
            "service.beta.kubernetes.io/aws-load-balancer-type",
        ]);
        let warnings = unknown_annotation_warnings(Some(&given), &[PREFIX], KNOWN);
        assert_eq!(
            warnings,
            [
                LoadBalancerWarning::new(
                    UNKNOWN_ANNOTATION,
                    format!(r#"Unknown annotation "{unrelated}" is ignored"#)
                ),
                LoadBalancerWarning::new(
                    UNKNOWN_ANNOTATION,
                    format!(
                        r#"Unknown annotation "{typo}" is ignored; did you mean "{}"?"#,
                        KNOWN[0]
                    )
                ),
            ]
        );
    }

    #[test]
    fn no_annotations_no_warnings() {
        assert!(unknown_annotation_warnings(None, &[PREFIX], KNOWN).is_empty());
        let known = annotations(KNOWN);
        assert!(unknown_annotation_warnings(Some(&known), &[PREFIX], KNOWN).is_empty());
        assert!(unknown_annotation_warnings(Some(&known), &[], &[]).is_empty());
    }

    #[test]
    fn a_key_under_two_prefixes_warns_once() {
        let given = annotations(&[&key("x")]);
        let warnings = unknown_annotation_warnings(Some(&given), &[PREFIX, "service.beta."], KNOWN);
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn messages_stay_under_one_kib_however_long_the_key() {
        let long = key(&"é".repeat(600));
        let given = annotations(&[&long]);
        let warnings = unknown_annotation_warnings(Some(&given), &[PREFIX], KNOWN);
        assert_eq!(warnings.len(), 1);
        let message = &warnings[0].message;
        assert!(message.len() < 1024, "{} bytes", message.len());
        assert!(message.contains(PREFIX) && message.contains("...\" is ignored"));
    }
}
