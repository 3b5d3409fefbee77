//! A provider's Service annotations, each described once: its key, the
//! syntax of its value, whether it may change once the load balancer
//! exists, whether it is deprecated, what it requires or excludes, and
//! what upstream's cloud-controller-manager does when it is at fault.
//!
//! [`AnnotationSchema::review`] turns a Service (and, on an update, the
//! Service before it) into [`Finding`]s. The service controller publishes
//! them as Warning events and the admission webhook denies or warns with
//! them, so both say the same words.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use super::upstream::{Meaning, UNKNOWN_KEY, Upstream, UpstreamVerdict};
use super::{Finding, FindingKind, nearest_key, quoted};
use crate::CloudError;

/// The longest value quoted in a finding, in bytes.
const MAX_QUOTED_VALUE: usize = 200;

/// The finalizer the service controller keeps on a Service whose load
/// balancer it made (upstream's `service.kubernetes.io/load-balancer-cleanup`).
const CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Every annotation one provider honours.
#[derive(Debug)]
pub struct AnnotationSchema {
    /// The key prefixes that are the provider's own, such as
    /// `service.beta.kubernetes.io/aws-load-balancer-`: a key under one of
    /// them that is not in [`annotations`](Self::annotations) is unknown.
    pub prefixes: &'static [&'static str],
    /// The annotations, in any order; keys are unique.
    pub annotations: &'static [Annotation],
}

/// One annotation a provider honours.
#[derive(Debug, Clone, Copy)]
pub struct Annotation {
    /// The full key.
    pub key: &'static str,
    /// The syntax of its value.
    pub value: Value,
    /// `Some(what to do instead)` when the value cannot change once the
    /// load balancer exists (the cloud cannot change it in place).
    pub immutable: Option<&'static str>,
    /// `Some(what to use instead)` when the key still works but is
    /// deprecated.
    pub deprecated: Option<&'static str>,
    /// `Some(why)` for a key upstream knows that this provider accepts but
    /// does not act on: admitted with a warning saying so, never refused as
    /// unknown, so manifests written for upstream keep applying.
    pub ignored: Option<&'static str>,
    /// `Some(why)` for a key upstream honours that this provider cannot
    /// honour yet: a malformed-value finding, so the service controller
    /// refuses the Service and the cloud never gets a load balancer other
    /// than the one asked for (admission denies it as
    /// [`upstream_on_invalid`](Self::upstream_on_invalid) says).
    pub unsupported: Option<&'static str>,
    /// Keys that must be present when this one is.
    pub requires: &'static [&'static str],
    /// Keys that must be absent when this one is present.
    pub conflicts: &'static [&'static str],
    /// What upstream does with a malformed value of this key, a missing or
    /// conflicting companion, or a combination the provider's own check
    /// refuses naming it; `None`: not said, and admission only warns.
    pub upstream_on_invalid: Option<Upstream>,
    /// What upstream does when this immutable annotation changes on an
    /// existing load balancer; `None`: not said, and admission only warns.
    pub upstream_on_change: Option<Upstream>,
    /// What a value means, for judging a change; `None`: trimmed values
    /// compared as [`Value`] compares them, unset unlike any value.
    pub meaning: Option<Meaning>,
}

impl Annotation {
    /// An annotation with `key` and `value`, mutable, current, with no
    /// requirement or conflict, and no word on upstream.
    pub const fn new(key: &'static str, value: Value) -> Self {
        Self {
            key,
            value,
            immutable: None,
            deprecated: None,
            ignored: None,
            unsupported: None,
            requires: &[],
            conflicts: &[],
            upstream_on_invalid: None,
            upstream_on_change: None,
            meaning: None,
        }
    }

    /// The value cannot change once the load balancer exists; `instead`
    /// says what to do, such as "create a new Service".
    #[must_use]
    pub const fn immutable(mut self, instead: &'static str) -> Self {
        self.immutable = Some(instead);
        self
    }

    /// The key is deprecated; `instead` names what replaces it.
    #[must_use]
    pub const fn deprecated(mut self, instead: &'static str) -> Self {
        self.deprecated = Some(instead);
        self
    }

    /// The provider accepts the key (any value) and does not act on it;
    /// `why` says so, such as "used by classic ELBs only".
    #[must_use]
    pub const fn ignored(mut self, why: &'static str) -> Self {
        self.ignored = Some(why);
        self
    }

    /// Upstream honours the key and this provider does not yet; `why` says
    /// what it would change.
    #[must_use]
    pub const fn unsupported(mut self, why: &'static str) -> Self {
        self.unsupported = Some(why);
        self
    }

    /// `keys` must be present when this annotation is.
    #[must_use]
    pub const fn requires(mut self, keys: &'static [&'static str]) -> Self {
        self.requires = keys;
        self
    }

    /// `keys` must be absent when this annotation is present.
    #[must_use]
    pub const fn conflicts(mut self, keys: &'static [&'static str]) -> Self {
        self.conflicts = keys;
        self
    }

    /// Upstream fails the Service on a malformed value (its parser or the
    /// cloud's API refuses it), so admission denies one; `why` says where.
    #[must_use]
    pub const fn upstream_fails(mut self, why: &'static str) -> Self {
        self.upstream_on_invalid = Some(Upstream::Fails(why));
        self
    }

    /// Upstream fails the Services `when` picks on a malformed value and
    /// goes on for the others; `why` says both.
    #[must_use]
    pub const fn upstream_fails_when(
        mut self,
        when: fn(&Service) -> bool,
        why: &'static str,
    ) -> Self {
        self.upstream_on_invalid = Some(Upstream::FailsWhen(when, why));
        self
    }

    /// Upstream goes on despite a malformed value, so admission admits it
    /// with a warning; `why` says what upstream does instead, worded to
    /// follow "admitted because".
    #[must_use]
    pub const fn upstream_accepts(mut self, why: &'static str) -> Self {
        self.upstream_on_invalid = Some(Upstream::Accepts(why));
        self
    }

    /// Upstream fails the ensure when this immutable annotation changes on
    /// an existing load balancer, so admission denies the change.
    #[must_use]
    pub const fn upstream_fails_change(mut self, why: &'static str) -> Self {
        self.upstream_on_change = Some(Upstream::Fails(why));
        self
    }

    /// Upstream goes on when this immutable annotation changes (it keeps
    /// what the load balancer has, say), so admission warns; `why` is
    /// worded to follow "admitted because".
    #[must_use]
    pub const fn upstream_accepts_change(mut self, why: &'static str) -> Self {
        self.upstream_on_change = Some(Upstream::Accepts(why));
        self
    }

    /// How a value is read when a change is judged, so that spelling out
    /// the default (or another spelling of the same value) is no change.
    #[must_use]
    pub const fn meaning(mut self, meaning: Meaning) -> Self {
        self.meaning = Some(meaning);
        self
    }
}

/// The syntax of an annotation's value. Values are trimmed first, as the
/// providers read them.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// Any text, empty included.
    Text,
    /// Any text but the empty one.
    NonEmpty,
    /// Go's `strconv.ParseBool` spellings (`1`, `t`, `T`, `TRUE`, `true`,
    /// `True` and their false counterparts).
    Bool,
    /// One of these words, compared exactly.
    OneOf(&'static [&'static str]),
    /// One of these words, compared without regard to ASCII case.
    OneOfIgnoreCase(&'static [&'static str]),
    /// A whole number in `min..=max`.
    Int {
        /// The least value allowed.
        min: i64,
        /// The greatest value allowed.
        max: i64,
    },
    /// A comma-separated list of at least one item, each of this syntax;
    /// spaces around items and empty items are ignored.
    List(&'static Value),
    /// Anything `check` accepts; `expected` describes it for the message
    /// ("a port number or traffic-port").
    Custom {
        /// The expected form, in words.
        expected: &'static str,
        /// Whether a (trimmed) value has that form.
        check: fn(&str) -> bool,
    },
}

impl Value {
    /// `Err(the expected form)` when `value` (trimmed) does not have this
    /// syntax.
    fn check(&self, value: &str) -> Result<(), String> {
        let value = value.trim();
        let ok = match self {
            Self::Text => true,
            Self::NonEmpty => !value.is_empty(),
            Self::Bool => parse_bool(value).is_some(),
            Self::OneOf(words) => words.contains(&value),
            Self::OneOfIgnoreCase(words) => words.iter().any(|w| w.eq_ignore_ascii_case(value)),
            Self::Int { min, max } => value
                .parse::<i64>()
                .is_ok_and(|n| (*min..=*max).contains(&n)),
            Self::List(item) => {
                let items: Vec<&str> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect();
                if items.is_empty() {
                    return Err(self.expected());
                }
                return items
                    .iter()
                    .find_map(|i| item.check(i).err().map(|_| *i))
                    .map_or(Ok(()), |bad| {
                        Err(format!(
                            "{}; `{}` is not",
                            self.expected(),
                            quoted(bad, MAX_QUOTED_VALUE)
                        ))
                    });
            }
            Self::Custom { check, .. } => check(value),
        };
        if ok { Ok(()) } else { Err(self.expected()) }
    }

    /// Whether two values (trimmed) mean the same: booleans by what they
    /// parse to, case-insensitive words without regard to case, anything
    /// else as text.
    fn same(&self, a: &str, b: &str) -> bool {
        let (a, b) = (a.trim(), b.trim());
        match self {
            Self::Bool => match (parse_bool(a), parse_bool(b)) {
                (Some(x), Some(y)) => x == y,
                _ => a == b,
            },
            Self::OneOfIgnoreCase(_) => a.eq_ignore_ascii_case(b),
            _ => a == b,
        }
    }

    /// The expected form, in words.
    pub fn expected(&self) -> String {
        match self {
            Self::Text => "any text".to_owned(),
            Self::NonEmpty => "a non-empty value".to_owned(),
            Self::Bool => "true or false".to_owned(),
            Self::OneOf(words) | Self::OneOfIgnoreCase(words) => one_of(words),
            Self::Int { min, max } => format!("a whole number from {min} to {max}"),
            Self::List(item) => format!("a comma-separated list of {}", item.expected()),
            Self::Custom { expected, .. } => (*expected).to_owned(),
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(words: &[&str]) -> String {
    match words {
        [] => "nothing".to_owned(),
        [one] => format!("`{one}`"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(|w| format!("`{w}`")).collect();
            format!("one of {} or `{last}`", rest.join(", "))
        }
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl AnnotationSchema {
    /// The description of `key`, if the provider honours it.
    pub fn get(&self, key: &str) -> Option<&Annotation> {
        self.annotations.iter().find(|a| a.key == key)
    }

    /// Whether `key` is under one of the provider's prefixes.
    pub fn owns(&self, key: &str) -> bool {
        self.prefixes.iter().any(|p| key.starts_with(p))
    }

    /// Every problem with `service`'s annotations, in key order: unknown
    /// keys, malformed values, missing requirements, conflicts and
    /// deprecated keys; and, when `old` is the same Service before an
    /// update and its load balancer existed, changes to immutable ones.
    /// Each problem carries what upstream does with `service`.
    pub fn review(&self, old: Option<&Service>, service: &Service) -> Vec<Finding> {
        let given = annotations_of(service);
        let known: Vec<&str> = self.annotations.iter().map(|a| a.key).collect();
        let mut findings = Vec::new();
        let mut conflicts = std::collections::BTreeSet::new();
        for (key, value) in given {
            let Some(annotation) = self.get(key) else {
                if self.owns(key) {
                    findings.push(unknown(key, &known));
                }
                continue;
            };
            let invalid = |message: String| Finding {
                kind: FindingKind::Invalid,
                key: key.clone(),
                message,
                upstream: annotation.upstream_on_invalid.map(|u| u.on(service)),
            };
            if let Some(why) = annotation.unsupported {
                findings.push(invalid(format!(
                    "annotation {key} is not supported by this cloud-controller-manager yet: {why}; remove it to get a load balancer without it"
                )));
                continue;
            }
            if let Some(why) = annotation.ignored {
                findings.push(Finding {
                    kind: FindingKind::Ignored,
                    key: key.clone(),
                    message: format!(
                        "annotation {key} is ignored by this cloud-controller-manager: {why}"
                    ),
                    upstream: None,
                });
                continue;
            }
            if let Err(expected) = annotation.value.check(value) {
                findings.push(invalid(format!(
                    "annotation {}: expected {expected}, got `{}`",
                    key,
                    quoted(value.trim(), MAX_QUOTED_VALUE)
                )));
            }
            for required in annotation.requires {
                if !given.contains_key(*required) {
                    findings.push(invalid(format!(
                        "annotation {key} needs {required} as well"
                    )));
                }
            }
            for conflicting in annotation.conflicts {
                if given.contains_key(*conflicting) {
                    conflicts.insert(order(key.as_str(), conflicting));
                }
            }
            if let Some(instead) = annotation.deprecated {
                findings.push(Finding {
                    kind: FindingKind::Deprecated,
                    key: key.clone(),
                    message: format!("annotation {key} is deprecated: {instead}"),
                    upstream: None,
                });
            }
        }
        findings.extend(conflicts.into_iter().map(|(a, b)| Finding {
            kind: FindingKind::Invalid,
            key: a.to_owned(),
            message: format!("annotations {a} and {b} cannot be used together: keep one"),
            upstream: self.upstream_on_invalid(a, service),
        }));
        if let Some(old) = old.filter(|old| had_load_balancer(old)) {
            findings.extend(self.immutable_changes(old, service));
        }
        findings
    }

    /// What upstream does with `service` when the annotation `key` is
    /// malformed, or in a combination the provider refuses; `None` when
    /// the schema does not say.
    pub fn upstream_on_invalid(&self, key: &str, service: &Service) -> Option<UpstreamVerdict> {
        self.get(key)
            .and_then(|a| a.upstream_on_invalid)
            .map(|u| u.on(service))
    }

    /// The provider's own refusal of `service` (what `check_service`
    /// answers with [`CloudError::InvalidInput`]) as a finding on the key
    /// it names, in the provider's words, with what upstream does when that
    /// key is at fault. `None` for any other error.
    pub fn refusal(&self, err: &CloudError, service: &Service) -> Option<Finding> {
        let CloudError::InvalidInput { field, .. } = err else {
            return None;
        };
        Some(Finding {
            kind: FindingKind::Invalid,
            key: field.clone(),
            message: err.to_string(),
            upstream: self.upstream_on_invalid(field, service),
        })
    }

    /// The immutable annotations whose meaning differs between `old` and
    /// `service` (added and removed count as changes, unless the value
    /// means what leaving it unset means).
    fn immutable_changes(&self, old: &Service, service: &Service) -> Vec<Finding> {
        self.annotations
            .iter()
            .filter_map(|a| a.immutable.map(|instead| (a, instead)))
            .filter_map(|(annotation, instead)| {
                let key = annotation.key;
                let same = match (read(annotation, old), read(annotation, service)) {
                    (Read::Value(a), Read::Value(b)) => annotation.value.same(a, b),
                    (Read::Unset, Read::Unset) | (Read::Unknown, _) | (_, Read::Unknown) => true,
                    (Read::Unset, Read::Value(_)) | (Read::Value(_), Read::Unset) => false,
                };
                let raw = |s: &Service| shown(annotations_of(s).get(key).map(|v| v.trim()));
                (!same).then(|| Finding {
                    kind: FindingKind::Immutable,
                    key: key.to_owned(),
                    message: format!(
                        "annotation {key} cannot change once the load balancer exists ({} -> {}): {instead}",
                        raw(old),
                        raw(service),
                    ),
                    upstream: annotation.upstream_on_change.map(|u| u.on(service)),
                })
            })
            .collect()
    }
}

/// An immutable annotation's value, as a change is judged.
enum Read<'a> {
    /// Absent, and no [`Meaning`] says what that means.
    Unset,
    /// What it means.
    Value(&'a str),
    /// What it means cannot be told from the Service alone.
    Unknown,
}

fn read<'a>(annotation: &Annotation, service: &'a Service) -> Read<'a> {
    let annotations = annotations_of(service);
    let value = annotations.get(annotation.key).map(|v| v.trim());
    match annotation.meaning {
        None => value.map_or(Read::Unset, Read::Value),
        Some(meaning) => meaning(value, annotations).map_or(Read::Unknown, Read::Value),
    }
}

/// The Service's annotations, empty when it has none.
fn annotations_of(service: &Service) -> &BTreeMap<String, String> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    service.metadata.annotations.as_ref().unwrap_or(&NONE)
}

/// The two keys in order, so a conflict declared on both sides is one.
fn order<'a>(a: &'a str, b: &'a str) -> (&'a str, &'a str) {
    if a <= b { (a, b) } else { (b, a) }
}

/// How a schema's verdict on a Service compares with its provider's own
/// parser: what a provider's tests pin for each value they try, so
/// admission never refuses a Service the provider would accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// Both accept it.
    Accepted,
    /// Both refuse it.
    Refused,
    /// The schema accepts what the provider refuses: a check that needs
    /// another annotation, the spec or the cloud, left to `check_service`.
    Looser,
}

impl AnnotationSchema {
    /// How this schema's malformed-value findings on `service` compare with
    /// the provider's verdict (`provider_accepts`).
    ///
    /// # Errors
    /// The schema refuses what the provider accepts (admission would refuse
    /// a good Service); the message lists the findings.
    pub fn agreement(
        &self,
        service: &Service,
        provider_accepts: bool,
    ) -> Result<Agreement, String> {
        let invalid: Vec<Finding> = self
            .review(None, service)
            .into_iter()
            .filter(|f| f.kind == FindingKind::Invalid)
            .collect();
        match (invalid.is_empty(), provider_accepts) {
            (true, true) => Ok(Agreement::Accepted),
            (false, false) => Ok(Agreement::Refused),
            (true, false) => Ok(Agreement::Looser),
            (false, true) => Err(format!(
                "accepted by the provider but refused by its schema: {invalid:?}"
            )),
        }
    }
}

/// A value as a finding quotes it, or `unset`.
fn shown(value: Option<&str>) -> String {
    value.map_or_else(
        || "unset".to_owned(),
        |v| format!("`{}`", quoted(v, MAX_QUOTED_VALUE)),
    )
}

/// Whether the service controller made a load balancer for `service`: it
/// is of type LoadBalancer and has our finalizer or an ingress.
fn had_load_balancer(service: &Service) -> bool {
    let is_lb = service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
    let finalized = service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == CLEANUP_FINALIZER));
    let ingress = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty());
    is_lb && (finalized || ingress)
}

/// The finding for an unknown key, with the nearest known one.
fn unknown(key: &str, known: &[&str]) -> Finding {
    let mut message = format!(
        "unknown annotation {}",
        quoted(key, super::MAX_QUOTED_BYTES)
    );
    if let Some(nearest) = nearest_key(key, known) {
        message.push_str(&format!("; did you mean {nearest}?"));
    }
    Finding {
        kind: FindingKind::Unknown,
        key: key.to_owned(),
        message,
        upstream: Some(UNKNOWN_KEY),
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
