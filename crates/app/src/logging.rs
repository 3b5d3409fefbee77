//! Logging: upstream's `-v` levels mapped onto tracing, `RUST_LOG` still wins.

use tracing_subscriber::EnvFilter;

/// klog verbosity to a tracing level: 0-1 info, 2-4 debug, 5 and up trace.
fn level(verbosity: u8) -> &'static str {
    match verbosity {
        0..=1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

/// Installs the global subscriber, writing to standard error.
pub(crate) fn init(verbosity: u8, json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // Dependencies stay at info unless RUST_LOG asks for more: their
        // debug output (HTTP internals) drowns ours.
        EnvFilter::new(format!(
            "info,ccm_app={0},ccm_runtime={0},ccm_controllers={0},leader_election={0}",
            level(verbosity)
        ))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests starting several apps in one process) keeps the first.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::level;

    #[test]
    fn klog_verbosity_maps_onto_tracing_levels() {
        assert_eq!(level(0), "info");
        assert_eq!(level(2), "debug");
        assert_eq!(level(4), "debug");
        assert_eq!(level(6), "trace");
    }
}
