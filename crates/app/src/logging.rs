//! Logging as klog users expect: `--v` levels, `--vmodule`, text or JSON
//! lines, split streams; `RUST_LOG`, when set, wins.
//!
//! klog's verbosity maps onto tracing's levels: INFO lines (what an operator
//! must see) show at `--v=0`, DEBUG lines (upstream's usual production
//! detail, each step on each object) from `--v=2`, TRACE lines from `--v=4`;
//! `--v=5` and up also show the libraries' own debug lines (HTTP, watches).

mod json;
mod vmodule;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU8, Ordering};

use tracing::Level;
use tracing_subscriber::filter::{FilterFn, Targets};
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub(crate) use vmodule::ModuleLevel;

/// How the process logs (component-base's logging flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    /// `--v`.
    pub(crate) verbosity: u8,
    /// `--vmodule`.
    pub(crate) vmodule: Vec<ModuleLevel>,
    /// `--logging-format=json`.
    pub(crate) json: bool,
    /// `--log-json-split-stream` / `--log-text-split-stream`: info to
    /// stdout, errors to stderr.
    pub(crate) split_stream: bool,
}

/// The crates whose lines `--v` governs: every library of ours is named
/// `ccm_*` (tidy's naming rule), the framework's and every provider's,
/// `cargo xtask new-provider`'s included, so no cloud is named here and a
/// new provider's lines follow `--v` as the others' do. A target matches a
/// prefix of its text (tracing's `Targets`).
const OUR_TARGETS: [&str; 1] = ["ccm_"];

/// The most verbose level shown at klog verbosity `v`.
pub(crate) fn level(v: u8) -> Level {
    match v {
        0..=1 => Level::INFO,
        2..=3 => Level::DEBUG,
        _ => Level::TRACE,
    }
}

/// klog's verbosity of a line at `level`: the lowest `--v` showing it.
pub(crate) fn verbosity_of(level: Level) -> u8 {
    match level {
        Level::TRACE => 4,
        Level::DEBUG => 2,
        _ => 0,
    }
}

/// Which lines show at verbosity `v` without `--vmodule`.
fn targets(v: u8) -> Targets {
    let libraries = match v {
        0..=4 => Level::INFO,
        5 => Level::DEBUG,
        _ => Level::TRACE,
    };
    let mut targets = Targets::new().with_default(libraries);
    for ours in OUR_TARGETS {
        targets = targets.with_target(ours, level(v));
    }
    targets
}

/// The current `--v`, which `PUT /debug/flags/v` changes at run time.
static VERBOSITY: AtomicU8 = AtomicU8::new(0);

/// The current verbosity.
pub(crate) fn verbosity() -> u8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Changes the verbosity of a running process, as upstream's
/// `/debug/flags/v` does (`--vmodule` entries keep theirs). Answers the
/// previous level.
pub(crate) fn set_verbosity(v: u8) -> u8 {
    let previous = VERBOSITY.swap(v, Ordering::Relaxed);
    // Callsites cached whether they are enabled; ask them again.
    tracing::callsite::rebuild_interest_cache();
    previous
}

/// Installs the global subscriber.
pub(crate) fn init(settings: &Config) {
    let writer = writer(settings);
    // Colour only for a person at a terminal: a log file or a collector gets
    // plain text.
    let ansi = !settings.json && !settings.split_stream && std::io::stderr().is_terminal();
    let layer = if settings.json {
        tracing_subscriber::fmt::layer()
            .event_format(json::KlogJson)
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .with_writer(writer)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed()
    };
    let registry = tracing_subscriber::registry();
    // A second init (tests starting several apps in one process) keeps the first.
    let _ = match EnvFilter::try_from_default_env() {
        Ok(from_env) => registry.with(layer.with_filter(from_env)).try_init(),
        Err(_) => {
            VERBOSITY.store(settings.verbosity, Ordering::Relaxed);
            let modules = vmodule::Modules::new(&settings.vmodule);
            // Beyond 6 nothing changes.
            let by_verbosity: Vec<Targets> = (0..=6).map(targets).collect();
            let filter = FilterFn::new(move |meta| match modules.level_for(meta.file()) {
                Some(v) => *meta.level() <= level(v),
                None => by_verbosity[usize::from(verbosity().min(6))]
                    .would_enable(meta.target(), meta.level()),
            });
            registry.with(layer.with_filter(filter)).try_init()
        }
    };
}

/// Where lines go: text to stderr as klog, JSON to stdout as component-base;
/// split streams send errors to stderr and everything else to stdout.
fn writer(settings: &Config) -> BoxMakeWriter {
    if settings.split_stream {
        BoxMakeWriter::new(
            std::io::stderr
                .with_max_level(Level::ERROR)
                .or_else(std::io::stdout),
        )
    } else if settings.json {
        BoxMakeWriter::new(std::io::stdout)
    } else {
        BoxMakeWriter::new(std::io::stderr)
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::{level, targets, verbosity_of};

    #[test]
    fn klog_verbosity_maps_onto_tracing_levels() {
        assert_eq!(level(0), Level::INFO);
        assert_eq!(level(2), Level::DEBUG);
        assert_eq!(level(4), Level::TRACE);
        assert_eq!(verbosity_of(Level::DEBUG), 2);
        assert_eq!(verbosity_of(Level::ERROR), 0);
    }

    #[test]
    fn libraries_stay_quiet_until_v5() {
        assert!(!targets(2).would_enable("hyper_util::client", &Level::DEBUG));
        assert!(targets(2).would_enable("ccm_controllers::route", &Level::DEBUG));
        assert!(!targets(0).would_enable("ccm_controllers::route", &Level::DEBUG));
        assert!(targets(5).would_enable("kube_client::client", &Level::DEBUG));
        assert!(targets(4).would_enable("ccm_provider_aws::api", &Level::TRACE));
    }

    #[test]
    fn every_provider_follows_v_whatever_its_cloud() {
        for provider in [
            "ccm_provider_aws::api",
            "ccm_provider_digitalocean",
            "ccm_provider_fake::server",
            "ccm_provider_rancher::client",
            "ccm_provider_acme",
        ] {
            assert!(
                targets(2).would_enable(provider, &Level::DEBUG),
                "{provider}"
            );
            assert!(
                !targets(0).would_enable(provider, &Level::DEBUG),
                "{provider}"
            );
            assert!(
                !targets(2).would_enable(provider, &Level::TRACE),
                "{provider}"
            );
        }
    }
}
