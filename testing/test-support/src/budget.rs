//! Call budgets: a piece of work's cloud requests counted by action, set
//! against what upstream's CCM sends for the same work, as a Markdown
//! table (`cargo xtask bench --only budgets` publishes them).

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::Ccm;

/// How long the CCM must send nothing for a piece of work to be over.
const QUIET: Duration = Duration::from_secs(3);
/// The longest wait for that quiet.
const QUIET_WITHIN: Duration = Duration::from_secs(60);
/// How often the request count is read while waiting for quiet.
const POLL: Duration = Duration::from_millis(250);

/// The environment variable naming the steady state's window in seconds
/// (`cargo xtask bench --only budgets` sets upstream's 300).
pub const STEADY_ENV: &str = "CALL_BUDGET_STEADY_SECONDS";
/// The window when the environment does not name one: long enough for
/// one node-status pass at a frequency of the same length.
const STEADY_DEFAULT: Duration = Duration::from_secs(20);

/// The steady state's window: [`STEADY_ENV`], else 20 s.
///
/// # Errors
/// When the variable is not a whole number of seconds.
pub fn steady_window() -> anyhow::Result<Duration> {
    match std::env::var(STEADY_ENV) {
        Err(_) => Ok(STEADY_DEFAULT),
        Ok(text) => text
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| anyhow::anyhow!("{STEADY_ENV}={text}: not a whole number of seconds")),
    }
}

/// Requests by action (`EC2 DescribeInstances`, `GET /v2/droplets/{id}`).
pub type Calls = BTreeMap<String, u64>;

/// What upstream sends for one piece of work, and how that is known.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub work: String,
    /// Requests by action, in the order upstream sends them.
    pub calls: Vec<(String, u64)>,
    /// Upstream's functions that send them.
    pub derivation: String,
}

impl Upstream {
    pub fn new(work: impl Into<String>, calls: &[(&str, u64)], derivation: &str) -> Self {
        Self {
            work: work.into(),
            calls: calls.iter().map(|(a, n)| ((*a).to_owned(), *n)).collect(),
            derivation: derivation.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    }

    pub fn total(&self) -> u64 {
        self.calls.iter().map(|(_, n)| n).sum()
    }
}

/// One row of the table: ours and upstream's for the same work.
#[derive(Debug, Clone)]
pub struct Row {
    pub ours: Calls,
    /// Our requests in the order they were sent.
    pub order: Vec<String>,
    /// The cloud's answers that were not a success, in order (`ELB
    /// DescribeLoadBalancers LoadBalancerNotFound`), where the cloud's
    /// stand-in tells them: what explains a retry.
    pub failed: Vec<String>,
    pub upstream: Upstream,
}

impl Row {
    pub fn ours_total(&self) -> u64 {
        self.ours.values().sum()
    }
}

/// The rows so far.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Row>,
}

/// Waits, bounded, until `requests` (a running count of the cloud's
/// requests) has not moved for three seconds: the work it counts is over.
pub async fn quiet(requests: impl Fn() -> usize) {
    let started = Instant::now();
    let mut seen = requests();
    let mut since = Instant::now();
    while started.elapsed() < QUIET_WITHIN {
        tokio::time::sleep(POLL).await;
        let now = requests();
        if now != seen {
            seen = now;
            since = Instant::now();
        } else if since.elapsed() >= QUIET {
            return;
        }
    }
}

/// Ends a budget test: prints the table (and, when the work itself failed,
/// the end of the CCM's log), then fails when any row is above upstream's,
/// naming our requests in order and the warnings of both CCM processes:
/// the one the lives ran under (`lives_log`) and `ccm`.
///
/// # Errors
/// `result`'s error.
///
/// # Panics
/// When a row of ours is above upstream's.
#[allow(
    clippy::print_stdout,
    reason = "the table is the test's report, shown with --nocapture or on failure"
)]
pub fn conclude(
    cloud: &str,
    table: &Table,
    result: anyhow::Result<()>,
    lives_log: &str,
    ccm: &Ccm,
) -> anyhow::Result<()> {
    let over = (!table.over().is_empty()).then(|| {
        format!(
            "more {cloud} calls than upstream for:\n{}\nwhat the CCMs warned of:\n{}\n{}",
            table.explain_over(),
            warnings(lives_log),
            warnings(&ccm.log())
        )
    });
    // The explanation first: a CI excerpt keeps the head of the output.
    if let Some(over) = &over {
        println!("{over}\n");
    }
    println!("{}", table.render());
    if let Err(err) = result {
        println!("the CCM's log:\n{}", ccm.log_tail());
        return Err(err);
    }
    assert!(over.is_none(), "{}", over.unwrap_or_default());
    Ok(())
}

/// The warnings and errors in a CCM's `log`, for a budget that was
/// exceeded: a failed reconcile is retried, and a retry repeats requests.
fn warnings(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    if lines.is_empty() {
        "(none)".to_owned()
    } else {
        lines.join("\n")
    }
}

impl Table {
    /// Adds a row from our requests, in the order they were sent; the
    /// row is returned for its [`Row::failed`].
    pub fn push(&mut self, order: Vec<String>, upstream: Upstream) -> &mut Row {
        let mut ours = Calls::new();
        for action in &order {
            *ours.entry(action.clone()).or_default() += 1;
        }
        self.rows.push(Row {
            ours,
            order,
            failed: Vec::new(),
            upstream,
        });
        let last = self.rows.len() - 1;
        &mut self.rows[last]
    }

    /// The rows where ours is above upstream's, each with our requests in
    /// order: for a failing test's message.
    pub fn explain_over(&self) -> String {
        self.over()
            .iter()
            .map(|r| {
                let failed = if r.failed.is_empty() {
                    String::new()
                } else {
                    format!("; the cloud's failed answers: {}", r.failed.join(", "))
                };
                format!(
                    "{}: ours {} > upstream {}; ours in order: {}{failed}",
                    r.upstream.work,
                    r.ours_total(),
                    r.upstream.total(),
                    r.order.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The rows where ours is above upstream's.
    pub fn over(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.ours_total() > r.upstream.total())
            .collect()
    }

    /// The table in Markdown: each row's totals, both breakdowns and how
    /// upstream's count is derived.
    pub fn render(&self) -> String {
        let mut text = String::from(
            "| work | ours | upstream | ours by action | upstream by action | upstream's calls |\n|---|---|---|---|---|---|\n",
        );
        for row in &self.rows {
            let ours: Vec<String> = row.ours.iter().map(|(a, n)| format!("{a} {n}")).collect();
            let upstream: Vec<String> = row
                .upstream
                .calls
                .iter()
                .map(|(a, n)| format!("{a} {n}"))
                .collect();
            text.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                row.upstream.work,
                row.ours_total(),
                row.upstream.total(),
                ours.join(", "),
                upstream.join(", "),
                row.upstream.derivation,
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_the_warn_and_error_lines() {
        let log = "t  INFO ok\nt  WARN reconcile failed\nt DEBUG x\nt ERROR gone";
        assert_eq!(warnings(log), "t  WARN reconcile failed\nt ERROR gone");
        assert_eq!(warnings("t  INFO ok"), "(none)");
    }

    #[test]
    fn a_row_above_upstream_is_named_and_rendered() {
        let mut table = Table::default();
        table.push(
            vec!["EC2 DescribeInstances".to_owned()],
            Upstream::new("init", &[("EC2 DescribeInstances", 2)], "per node"),
        );
        table
            .push(
                vec!["GET /v2/droplets".to_owned(); 3],
                Upstream::new("list", &[("GET /v2/droplets", 2)], "a   list\n  twice"),
            )
            .failed = vec!["GET /v2/droplets 503".to_owned()];
        let over = table.over();
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].upstream.work, "list");
        assert_eq!(over[0].ours.get("GET /v2/droplets"), Some(&3));
        assert!(
            table
                .explain_over()
                .starts_with("list: ours 3 > upstream 2; ours in order: GET /v2/droplets, "),
            "{}",
            table.explain_over()
        );
        assert!(
            table
                .explain_over()
                .ends_with("; the cloud's failed answers: GET /v2/droplets 503"),
            "{}",
            table.explain_over()
        );
        let text = table.render();
        assert!(
            text.contains(
                "| init | 1 | 2 | EC2 DescribeInstances 1 | EC2 DescribeInstances 2 | per node |"
            ),
            "{text}"
        );
        assert!(text.contains("| a list twice |"), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_ends_three_seconds_after_the_last_request() {
        let count = std::sync::atomic::AtomicUsize::new(0);
        let started = Instant::now();
        let waiting = quiet(|| count.load(std::sync::atomic::Ordering::SeqCst));
        let bumping = async {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        };
        tokio::join!(waiting, bumping);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
            "{waited:?}"
        );
    }
}
