//! Counting one piece of work's AWS requests at the proxy, by API and
//! action, into the shared table ([`ccm_test_support::budget`]).

use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_test_support::budget::{Table, Upstream, quiet};

/// The two kinds of load balancer a Service gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Nlb,
    Classic,
}

impl Kind {
    pub(crate) fn slug(self) -> &'static str {
        match self {
            Self::Nlb => "nlb",
            Self::Classic => "classic",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Nlb => "NLB",
            Self::Classic => "classic ELB",
        }
    }
}

/// Work being counted: the proxy's requests from `from` on, and its
/// failed answers from `failed_from` on.
#[derive(Clone, Copy)]
pub(crate) struct Counting<'a> {
    proxy: &'a Proxy,
    from: usize,
    failed_from: usize,
}

pub(crate) fn start(proxy: &Proxy) -> Counting<'_> {
    Counting {
        proxy,
        from: proxy.calls().len(),
        failed_from: proxy.failure_log().len(),
    }
}

/// Ends `counting` once the CCM has gone quiet, and adds its row.
pub(crate) async fn finish(table: &mut Table, counting: Counting<'_>, upstream: Upstream) {
    quiet(|| counting.proxy.calls().len()).await;
    finish_now(table, counting, upstream);
}

/// Ends `counting` now, and adds its row.
pub(crate) fn finish_now(table: &mut Table, counting: Counting<'_>, upstream: Upstream) {
    let order = counting.proxy.calls()[counting.from..]
        .iter()
        .map(|call| format!("{} {}", call.api, call.action))
        .collect();
    table.push(order, upstream).failed =
        counting.proxy.failure_log()[counting.failed_from..].to_vec();
}
