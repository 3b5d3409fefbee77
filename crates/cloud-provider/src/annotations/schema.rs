//! A provider's Service annotations, each described once: its key, the
//! syntax of its value, whether it may change once the load balancer
//! exists, whether it is deprecated, and what it requires or excludes.
//!
//! [`AnnotationSchema::review`] turns a Service (and, on an update, the
//! Service before it) into [`Finding`]s. The service controller publishes
//! them as Warning events and the admission webhook refuses or warns with
//! them, so both say the same words.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

use super::{nearest_key, quoted};
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
    /// honour yet: refused (a malformed-value finding), so the cloud never
    /// gets a load balancer other than the one asked for.
    pub unsupported: Option<&'static str>,
    /// Keys that must be present when this one is.
    pub requires: &'static [&'static str],
    /// Keys that must be absent when this one is present.
    pub conflicts: &'static [&'static str],
}

impl Annotation {
    /// An annotation with `key` and `value`, mutable, current, with no
    /// requirement or conflict.
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

/// What kind of problem a [`Finding`] is, which decides what each caller
/// does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// A malformed value, or a missing required or present conflicting
    /// annotation. Admission refuses it; the service controller makes no
    /// cloud change.
    Invalid,
    /// A key under the provider's prefixes that it does not know. Admission
    /// refuses it; the service controller warns and goes on without it.
    Unknown,
    /// A change to an annotation that cannot change once the load balancer
    /// exists. Admission refuses it.
    Immutable,
    /// A deprecated key: admission admits it with a warning; the service
    /// controller warns.
    Deprecated,
    /// A key upstream knows that this provider does not act on: admitted
    /// with a warning; the service controller warns.
    Ignored,
}

impl FindingKind {
    /// The reason of the Warning event the service controller publishes.
    pub const fn reason(self) -> &'static str {
        match self {
            Self::Invalid => "InvalidAnnotation",
            Self::Unknown => super::UNKNOWN_ANNOTATION,
            Self::Immutable => "ImmutableAnnotation",
            Self::Deprecated => "DeprecatedAnnotation",
            Self::Ignored => "IgnoredAnnotation",
        }
    }

    /// Whether admission refuses a Service with this finding.
    pub const fn refuses(self) -> bool {
        !matches!(self, Self::Deprecated | Self::Ignored)
    }
}

/// One problem with a Service's annotations, in words for its author.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    /// What kind of problem it is.
    pub kind: FindingKind,
    /// The annotation at fault.
    pub key: String,
    /// The message, under 1 KiB.
    pub message: String,
}

impl Finding {
    /// The finding as the error a provider returns for it.
    pub fn to_error(&self) -> CloudError {
        CloudError::InvalidInput {
            field: self.key.clone(),
            message: self.message.clone(),
        }
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
    pub fn review(&self, old: Option<&Service>, service: &Service) -> Vec<Finding> {
        let empty = BTreeMap::new();
        let given = service.metadata.annotations.as_ref().unwrap_or(&empty);
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
            if let Some(why) = annotation.unsupported {
                findings.push(Finding {
                    kind: FindingKind::Invalid,
                    key: key.clone(),
                    message: format!(
                        "annotation {key} is not supported by this cloud-controller-manager yet: {why}; remove it to get a load balancer without it"
                    ),
                });
                continue;
            }
            if let Some(why) = annotation.ignored {
                findings.push(Finding {
                    kind: FindingKind::Ignored,
                    key: key.clone(),
                    message: format!(
                        "annotation {key} is ignored by this cloud-controller-manager: {why}"
                    ),
                });
                continue;
            }
            if let Err(expected) = annotation.value.check(value) {
                findings.push(Finding {
                    kind: FindingKind::Invalid,
                    key: key.clone(),
                    message: format!(
                        "annotation {}: expected {expected}, got `{}`",
                        key,
                        quoted(value.trim(), MAX_QUOTED_VALUE)
                    ),
                });
            }
            for required in annotation.requires {
                if !given.contains_key(*required) {
                    findings.push(Finding {
                        kind: FindingKind::Invalid,
                        key: key.clone(),
                        message: format!("annotation {key} needs {required} as well"),
                    });
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
                });
            }
        }
        findings.extend(conflicts.into_iter().map(|(a, b)| Finding {
            kind: FindingKind::Invalid,
            key: a.to_owned(),
            message: format!("annotations {a} and {b} cannot be used together: keep one"),
        }));
        if let Some(old) = old.filter(|old| had_load_balancer(old)) {
            findings.extend(self.immutable_changes(old, service));
        }
        findings
    }

    /// The immutable annotations whose value differs between `old` and
    /// `service` (added and removed count as changes).
    fn immutable_changes(&self, old: &Service, service: &Service) -> Vec<Finding> {
        let value = |s: &Service, key: &str| {
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(|v| v.trim().to_owned())
        };
        self.annotations
            .iter()
            .filter_map(|a| a.immutable.map(|instead| (a, instead)))
            .filter_map(|(annotation, instead)| {
                let key = annotation.key;
                let (before, after) = (value(old, key), value(service, key));
                let same = match (&before, &after) {
                    (Some(a), Some(b)) => annotation.value.same(a, b),
                    (None, None) => true,
                    _ => false,
                };
                (!same).then(|| Finding {
                    kind: FindingKind::Immutable,
                    key: key.to_owned(),
                    message: format!(
                        "annotation {key} cannot change once the load balancer exists ({} -> {}): {instead}",
                        shown(before.as_deref()),
                        shown(after.as_deref()),
                    ),
                })
            })
            .collect()
    }
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
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
