//! One problem with a Service's annotations ([`Finding`]), what kind it is,
//! and what upstream's cloud-controller-manager does with the same Service.

use super::upstream::UpstreamVerdict;
use crate::CloudError;

/// What the service controller does about a Service with a malformed
/// annotation that admission let through.
const UNCHANGED: &str =
    "this cloud-controller-manager makes no load-balancer change for the Service until it is fixed";

/// What kind of problem a [`Finding`] is, which decides what each caller
/// does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// A malformed value, a missing required or present conflicting
    /// annotation, or a combination the provider refuses. Admission denies
    /// it where upstream fails the Service too (and in strict mode); the
    /// service controller makes no cloud change.
    Invalid,
    /// A key under the provider's prefixes that it does not know. Upstream
    /// ignores it, so admission warns (strict mode denies); the service
    /// controller warns and goes on without it.
    Unknown,
    /// A change to an annotation that cannot change once the load balancer
    /// exists. Admission denies it where upstream fails the ensure on it
    /// (and in strict mode), and warns otherwise.
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

    /// Whether admission may deny a Service with this finding: strict
    /// admission always does, the default only where upstream fails the
    /// Service too ([`Finding::upstream_fails`]).
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
    /// What upstream does with the same Service; `None` for deprecated and
    /// ignored keys and where the schema does not say (admission then
    /// warns).
    pub upstream: Option<UpstreamVerdict>,
}

impl Finding {
    /// The finding as the error a provider returns for it.
    pub fn to_error(&self) -> CloudError {
        CloudError::InvalidInput {
            field: self.key.clone(),
            message: self.message.clone(),
        }
    }

    /// Whether upstream fails the Service on this problem too: then the
    /// admission webhook denies it.
    pub fn upstream_fails(&self) -> bool {
        self.kind.refuses() && self.upstream.is_some_and(|u| u.fails)
    }

    /// The warning admission gives when it admits the Service anyway: the
    /// message, and for a problem, why it is admitted and what this
    /// cloud-controller-manager does about it.
    pub fn warning(&self) -> String {
        let message = &self.message;
        let why = self.upstream.filter(|u| !u.fails).map(|u| u.why);
        match (self.kind, why) {
            (FindingKind::Unknown, _) => {
                format!("{message} (ignored here, as {})", super::UNKNOWN_KEY.why)
            }
            (FindingKind::Invalid, Some(why)) => {
                format!("{message} (admitted because {why}; {UNCHANGED})")
            }
            (FindingKind::Invalid, None) => format!("{message} ({UNCHANGED})"),
            (FindingKind::Immutable, Some(why)) => format!("{message} (admitted because {why})"),
            (FindingKind::Immutable, None)
            | (FindingKind::Deprecated | FindingKind::Ignored, _) => message.clone(),
        }
    }
}
