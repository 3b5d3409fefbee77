//! The framework's counters as a scrape of `/metrics` reads them.

use ccm_runtime::Metrics;

/// The value of the sample of `series` carrying every one of `labels` in
/// `metrics`' exposition; 0 when there is none yet.
pub fn sample(metrics: &Metrics, series: &str, labels: &[(&str, &str)]) -> u64 {
    let text = metrics.encode(None);
    text.lines()
        .filter_map(|line| line.strip_prefix(series)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once("} "))
        .find(|(matchers, _)| {
            labels.iter().all(|(name, value)| {
                matchers
                    .split(',')
                    .any(|m| m == format!("{name}=\"{value}\""))
            })
        })
        .and_then(|(_, value)| value.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

/// Cloud-provider calls of `operation` with `outcome` so far
/// (`ccm_cloud_provider_calls_total`).
pub fn cloud_call_count(metrics: &Metrics, operation: &str, outcome: &str) -> u64 {
    sample(
        metrics,
        "ccm_cloud_provider_calls_total",
        &[("operation", operation), ("outcome", outcome)],
    )
}

/// Reconciles of `controller` with `result` so far
/// (`ccm_controller_reconciles_total`).
pub fn reconcile_count(metrics: &Metrics, controller: &str, result: &str) -> u64 {
    sample(
        metrics,
        "ccm_controller_reconciles_total",
        &[("controller", controller), ("result", result)],
    )
}
