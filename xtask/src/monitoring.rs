//! `cargo xtask monitoring`: the chart's alert rules and dashboard, checked
//! by Prometheus's own tools. promtool checks the rendered rules and runs
//! their unit tests; then a real Prometheus scrapes the sandbox's CCM, a
//! scripted fault fires the load-balancer and uninitialized-node alerts,
//! and every dashboard query must return data from it.

mod live;
mod prometheus;
mod rules;

use std::time::Duration;

use anyhow::Context;

use crate::cmd::target_dir;
use crate::tools;

/// Alert rules and dashboard: promtool, rule unit tests, a real Prometheus run.
///
/// Installs Debian's prometheus package (prometheus and promtool), helm and
/// kubernetes-validate when missing, then:
///   - renders the chart's PrometheusRule (ci/fake-values.yaml with
///     monitoring/rules-values.yaml) and runs `promtool check rules` on it;
///   - runs `promtool test rules monitoring/rules.test.yaml`: each alert fires
///     on a series that should fire it and stays quiet on one that should not;
///   - starts the test API server and the fake-cloud-controller-manager as the
///     sandbox does, and a real Prometheus scraping the CCM's /metrics over
///     HTTPS with a reader's token, evaluating the same rules with short `for:`
///     windows; then a scripted fault (a Service whose load-balancer calls the
///     fake cloud fails, a node the cloud does not know) must take
///     CloudControllerManagerLoadBalancerFailing and
///     CloudControllerManagerNodeUninitialized from pending to firing, every
///     dashboard query must return data, and once the fault ends both alerts
///     must go back to inactive, with no other alert firing. Prints the times.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Only promtool's rule check and the rule unit tests (no build, no Prometheus run).
    #[arg(long = "static")]
    static_only: bool,
    /// The longest the Prometheus run may take, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    tools::prometheus::ensure()?;
    tools::helm::ensure()?;
    tools::kubernetes_validate::ensure()?;
    let dir = target_dir().join("monitoring");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

    let rules = rules::render(&dir.join("rules.json"), &[])?;
    rules::check(&rules)?;
    rules::unit_tests(&dir)?;
    if options.static_only {
        return Ok(());
    }
    live::run(&dir, Duration::from_secs(options.timeout))
}

#[cfg(test)]
mod tests {
    use crate::{Task, parse_task};

    #[test]
    fn options_parse_and_bad_ones_are_refused() {
        let Task::Monitoring(options) = parse_task(&["monitoring"]).unwrap() else {
            panic!("not the monitoring task");
        };
        assert!(!options.static_only);
        assert_eq!(options.timeout, 300);
        let Task::Monitoring(options) =
            parse_task(&["monitoring", "--static", "--timeout=60"]).unwrap()
        else {
            panic!("not the monitoring task");
        };
        assert!(options.static_only);
        assert_eq!(options.timeout, 60);
        assert!(parse_task(&["monitoring", "--timeout", "soon"]).is_err());
    }
}
