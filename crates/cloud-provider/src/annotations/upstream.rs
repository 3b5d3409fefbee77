//! What upstream's cloud-controller-manager does with a Service whose
//! annotation is at fault, said once per key in the provider's
//! [`AnnotationSchema`](super::AnnotationSchema).
//!
//! The admission webhook denies only what upstream would fail the Service
//! on (its `EnsureLoadBalancer` returns an error, or the cloud's API
//! refuses the call it makes), and admits the rest with a warning: a
//! manifest that applied with the Go CCM applies here too.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;

/// What upstream does with a Service when one annotation is at fault, as
/// its schema entry says.
#[derive(Debug, Clone, Copy)]
pub enum Upstream {
    /// Upstream fails the Service: its parser or the cloud's API refuses.
    /// The text says where, for the docs and the tests.
    Fails(&'static str),
    /// Upstream fails the Services `when` picks (a classic ELB, say) and
    /// goes on for the others; the text says both.
    FailsWhen(fn(&Service) -> bool, &'static str),
    /// Upstream goes on: it ignores the key, reads a default, or keeps what
    /// the load balancer has. The text says which, worded to follow
    /// "admitted because".
    Accepts(&'static str),
}

impl Upstream {
    /// What upstream does with `service`.
    pub fn on(self, service: &Service) -> UpstreamVerdict {
        match self {
            Self::Fails(why) => UpstreamVerdict { fails: true, why },
            Self::FailsWhen(when, why) => UpstreamVerdict {
                fails: when(service),
                why,
            },
            Self::Accepts(why) => UpstreamVerdict { fails: false, why },
        }
    }
}

/// What upstream does with one Service, as a [`Finding`](super::Finding)
/// carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpstreamVerdict {
    /// Upstream fails the Service, so admission denies it.
    pub fails: bool,
    /// Upstream's behaviour, in words.
    pub why: &'static str,
}

/// What upstream does with a key under the provider's prefixes that it
/// does not know: every upstream CCM reads only the keys it knows.
pub const UNKNOWN_KEY: UpstreamVerdict = UpstreamVerdict {
    fails: false,
    why: "upstream's cloud-controller-manager ignores keys it does not read",
};

/// What an annotation's value means to the provider, for telling a change
/// from a respelling or from spelling out the default: `value` is the
/// trimmed value (`None` when the key is absent), `annotations` all of the
/// Service's. `None` when the Service alone cannot tell (a default that
/// depends on the nodes, say): no change is reported then, and the
/// provider judges it against the load balancer it has.
pub type Meaning = for<'a> fn(
    value: Option<&'a str>,
    annotations: &'a BTreeMap<String, String>,
) -> Option<&'a str>;
