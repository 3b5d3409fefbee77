//! Upstream's debugging endpoints on the metrics server: `/debug/pprof/`
//! (with `--profiling`, the default) and `/configz` (always), as
//! k8s.io/controller-manager's `NewBaseHandler` installs them; and ours,
//! `/debug/plan`, a dry run's plan (`--dry-run`) as JSON.
//!
//! They are part of the one router `server.rs` serves, so whatever guards
//! `/metrics` guards them too.

pub(crate) mod configz;
mod pprof;
#[cfg(test)]
mod tests;

use axum::Router;
use ccm_runtime::dry_run::Plan;

use crate::flags::Settings;
use crate::flags::debugging::Debugging;

/// The global allocator: jemalloc, whose sampling heap profiler serves
/// `/debug/pprof/heap`. It is built with `prof:true,prof_active:true,
/// lg_prof_sample:19` (`.cargo/config.toml`): one sampled allocation per
/// 512 KiB allocated on average, as Go's default `MemProfileRate`; a sample
/// costs one stack walk. `--profiling=false` turns sampling off at start-up.
/// One background thread gives freed pages back to the kernel within about
/// a second (`background_thread:true,max_background_threads:1,
/// dirty_decay_ms:1000`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The debugging routes for `settings`: `/configz` always, `/debug/pprof/`
/// with `--profiling`, `/debug/plan` in a dry run (`plan`). `provider` is
/// this binary's provider, upstream's `--cloud-provider`.
pub(crate) fn routes(settings: &Settings, provider: &str, plan: Option<Plan>) -> Router {
    let mut router = Router::new().merge(configz::routes(settings, provider));
    if let Some(plan) = plan {
        router = router.route(
            "/debug/plan",
            axum::routing::get(move || {
                let summary = plan.summary();
                async move { axum::Json(summary) }
            }),
        );
    }
    if settings.debugging.profiling {
        router.merge(pprof::routes())
    } else {
        router
    }
}

/// Start-up side of the debugging flags; call once.
///
/// Without `--profiling` nobody can read a heap profile, so allocation
/// sampling stops. `--contention-profiling` is accepted and explained.
pub(crate) async fn init(debugging: &Debugging) {
    if debugging.contention_profiling {
        tracing::info!(
            "--contention-profiling: upstream turns on Go's block profiling (with --profiling); this process has no Go runtime and no equivalent, so the flag does nothing"
        );
    }
    if !debugging.profiling {
        pprof::stop_heap_sampling().await;
    }
}
