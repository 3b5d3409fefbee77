//! What the chart's alert rules and Grafana dashboard query, and whether a
//! binary's `/metrics` exports it: the check that keeps the rules and
//! panels from drifting away from the metrics (issue: monitoring).
//!
//! The queries are read from the chart's sources, not a rendered copy:
//! `templates/prometheusrule.yaml` (its `expr:` values, with the template
//! actions replaced by a selector or a number) and
//! `dashboards/cloud-controller-manager.json` (each panel target's `expr`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Context;

/// Labels Prometheus adds to every series it scrapes, and the histogram
/// bucket label; never checked against an exposition.
const TARGET_LABELS: [&str; 3] = ["job", "instance", "le"];

/// Series Prometheus makes itself.
const SYNTHETIC: [&str; 1] = ["up"];

/// PromQL words that are not metric names.
const KEYWORDS: [&str; 12] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
];

/// Metric name → the labels the queries match or group it by.
pub type Used = BTreeMap<String, BTreeSet<String>>;

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/cloud-controller-manager")
}

/// Every query of the chart's alert rules and dashboard.
///
/// # Errors
/// When a source cannot be read or the dashboard is not JSON.
pub fn chart_queries() -> anyhow::Result<Vec<String>> {
    let rules_path = chart_dir().join("templates/prometheusrule.yaml");
    let rules = std::fs::read_to_string(&rules_path)
        .with_context(|| format!("reading {}", rules_path.display()))?;
    let mut queries = rule_exprs(&rules);
    let dashboard_path = chart_dir().join("dashboards/cloud-controller-manager.json");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&dashboard_path)
            .with_context(|| format!("reading {}", dashboard_path.display()))?,
    )
    .with_context(|| format!("parsing {}", dashboard_path.display()))?;
    queries.extend(dashboard_exprs(&dashboard));
    Ok(queries)
}

/// The metrics and labels the chart's queries use.
///
/// # Errors
/// As [`chart_queries`].
pub fn chart_metrics() -> anyhow::Result<Used> {
    let mut used = Used::new();
    for query in chart_queries()? {
        for (metric, labels) in selectors(&query) {
            used.entry(metric).or_default().extend(labels);
        }
    }
    Ok(used)
}

/// The `expr:` values of a rules template (one line, or a `|-` block),
/// with `{{ ... $sel ... }}` read as a selector and any other action as 1.
fn rule_exprs(template: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = template.lines().peekable();
    while let Some(line) = lines.next() {
        let Some((indent, value)) = line.split_once("expr:") else {
            continue;
        };
        let value = value.trim();
        if value.starts_with('|') {
            let mut block = Vec::new();
            while let Some(next) = lines.peek() {
                if next.len() - next.trim_start().len() <= indent.len() {
                    break;
                }
                block.push(next.trim());
                lines.next();
            }
            exprs.push(untemplate(&block.join(" ")));
        } else {
            exprs.push(untemplate(value));
        }
    }
    exprs
}

fn untemplate(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find("}}") else {
            break;
        };
        let action = &rest[start..start + end + 2];
        if action.starts_with("{{-") {
            out.truncate(out.trim_end().len());
        }
        out.push_str(if action.contains("$sel") {
            "job=\"ccm\""
        } else {
            "1"
        });
        rest = &rest[start + end + 2..];
        if action.ends_with("-}}") {
            rest = rest.trim_start();
        }
    }
    out.push_str(rest);
    out
}

/// Each panel target's `expr`, then the metric of each variable's
/// `label_values(metric, label)` query.
fn dashboard_exprs(dashboard: &serde_json::Value) -> Vec<String> {
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                exprs.push(expr.replace("$job", "ccm"));
            }
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = variable["query"]["query"].as_str().unwrap_or_default();
        if let Some(args) = query.strip_prefix("label_values(") {
            let metric = args.split(',').next().unwrap_or_default().trim();
            exprs.push(metric.to_owned());
        }
    }
    exprs
}

/// The metric names a PromQL expression selects, each with the labels its
/// matchers name and every grouping label of the expression (`by`,
/// `without`, `on`, `ignoring`).
pub fn selectors(expr: &str) -> Vec<(String, BTreeSet<String>)> {
    let chars: Vec<char> = expr.chars().collect();
    let mut metrics: Vec<(String, BTreeSet<String>)> = Vec::new();
    let mut grouping = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i = skip_string(&chars, i);
        } else if c == '[' {
            i = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .map_or(chars.len(), |p| i + p + 1);
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = skip_spaces(&chars, i);
            let next_char = chars.get(next).copied();
            if KEYWORDS.contains(&word.as_str()) {
                if next_char == Some('(') {
                    let (labels, after) = label_list(&chars, next);
                    grouping.extend(labels);
                    i = after;
                }
            } else if next_char == Some('(') || starts_grouping(&chars, next) {
                // A function or an aggregation.
            } else if next_char == Some('{') {
                let (labels, after) = matchers(&chars, next);
                metrics.push((word, labels));
                i = after;
            } else {
                metrics.push((word, BTreeSet::new()));
            }
        } else if c == '{' {
            i = matchers(&chars, i).1;
        } else {
            i += 1;
        }
    }
    for (_, labels) in &mut metrics {
        labels.extend(grouping.iter().cloned());
    }
    metrics
}

/// Whether `by` or `without` starts at `i` (after an aggregation's name).
fn starts_grouping(chars: &[char], i: usize) -> bool {
    ["by", "without"].iter().any(|word| {
        let end = i + word.len();
        chars
            .get(i..end)
            .is_some_and(|w| w.iter().copied().eq(word.chars()))
            && chars
                .get(end)
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    })
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// Past the string literal starting at `i`.
fn skip_string(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() && chars[j] != quote {
        if chars[j] == '\\' {
            j += 1;
        }
        j += 1;
    }
    j + 1
}

/// The label names of `( a, b )` at `i`, and the index past it.
fn label_list(chars: &[char], i: usize) -> (BTreeSet<String>, usize) {
    let end = chars[i..]
        .iter()
        .position(|&c| c == ')')
        .map_or(chars.len(), |p| i + p);
    let inner: String = chars[i + 1..end].iter().collect();
    let labels = inner
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    (labels, end + 1)
}

/// The label names of the matchers `{a="x", b=~"y"}` at `i`, and the index
/// past them.
fn matchers(chars: &[char], mut i: usize) -> (BTreeSet<String>, usize) {
    let mut labels = BTreeSet::new();
    i += 1;
    let mut name = String::new();
    while i < chars.len() && chars[i] != '}' {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i = skip_string(chars, i);
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            name.push(c);
        } else if matches!(c, '=' | '!' | '~') {
            if !name.is_empty() {
                labels.insert(std::mem::take(&mut name));
            }
        } else {
            name.clear();
        }
        i += 1;
    }
    (labels, i + 1)
}

/// One `/metrics` text, read as Prometheus would store it.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Every series name a `# TYPE` line declares (counters as `_total`,
    /// histograms as `_bucket`, `_sum`, `_count`).
    pub names: BTreeSet<String>,
    /// Series name → the label names of its samples in this text.
    pub labels: BTreeMap<String, BTreeSet<String>>,
}

impl Exposition {
    /// Parses the text format (Prometheus's or OpenMetrics').
    pub fn parse(text: &str) -> Self {
        let mut exposition = Self::default();
        for line in text.lines() {
            if let Some(declared) = line.strip_prefix("# TYPE ") {
                let mut parts = declared.split_whitespace();
                let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    "summary" => &["", "_sum", "_count"],
                    _ => &[""],
                };
                for suffix in suffixes {
                    let series = if name.ends_with(suffix) {
                        name.to_owned()
                    } else {
                        format!("{name}{suffix}")
                    };
                    exposition.names.insert(series);
                }
            } else if !line.starts_with('#') && !line.trim().is_empty() {
                let chars: Vec<char> = line.chars().collect();
                let end = chars
                    .iter()
                    .position(|&c| c == '{' || c == ' ')
                    .unwrap_or(chars.len());
                let name: String = chars[..end].iter().collect();
                let labels = if chars.get(end) == Some(&'{') {
                    matchers(&chars, end).0
                } else {
                    BTreeSet::new()
                };
                exposition.labels.entry(name).or_default().extend(labels);
            }
        }
        exposition
    }

    /// What of `used` this text lacks: each missing metric name, and each
    /// label a query uses that none of a metric's samples carry. A metric
    /// with no samples here has its labels left unchecked.
    pub fn missing(&self, used: &Used) -> Vec<String> {
        let mut missing = Vec::new();
        for (metric, labels) in used {
            if SYNTHETIC.contains(&metric.as_str()) {
                continue;
            }
            if !self.names.contains(metric) {
                missing.push(format!("metric {metric}"));
                continue;
            }
            let Some(present) = self.labels.get(metric) else {
                continue;
            };
            for label in labels {
                if !TARGET_LABELS.contains(&label.as_str()) && !present.contains(label) {
                    missing.push(format!("label {label} of {metric}"));
                }
            }
        }
        missing
    }
}

/// Fails, naming each gap, when `/metrics` text lacks a metric or label
/// the chart's rules or dashboard use. `absent` names the metrics this run
/// cannot export, each with why (a controller it leaves off); each must
/// indeed be missing, so an exception cannot outlive its reason.
///
/// # Errors
/// The gaps, one per line, or a chart source that cannot be read.
pub fn check_chart_metrics_exported(
    metrics_text: &str,
    absent: &[(&str, &str)],
) -> anyhow::Result<()> {
    let mut used = chart_metrics()?;
    let exposition = Exposition::parse(metrics_text);
    let mut gaps = Vec::new();
    for (metric, why) in absent {
        anyhow::ensure!(
            used.remove(*metric).is_some(),
            "{metric} is not used by the chart's rules or dashboard"
        );
        if exposition.names.contains(*metric) {
            gaps.push(format!("{metric} is exported, though said absent ({why})"));
        }
    }
    gaps.extend(exposition.missing(&used));
    anyhow::ensure!(
        gaps.is_empty(),
        "the chart's alert rules or dashboard use what /metrics does not export:\n  {}",
        gaps.join("\n  ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(labels: &[&str]) -> BTreeSet<String> {
        labels.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn selectors_find_metrics_matchers_and_grouping_labels() {
        let expr = "sum by (operation) (rate(ccm_cloud_provider_calls_total{job=\"ccm\", outcome=~\"error|retry\"}[5m])) \
                    / sum by (operation) (rate(ccm_cloud_provider_calls_total{job=\"ccm\"}[5m])) > 0.1";
        assert_eq!(
            selectors(expr),
            vec![
                (
                    "ccm_cloud_provider_calls_total".to_owned(),
                    set(&["job", "operation", "outcome"])
                ),
                (
                    "ccm_cloud_provider_calls_total".to_owned(),
                    set(&["job", "operation"])
                ),
            ]
        );
        assert_eq!(
            selectors("max(up{job=\"ccm\"}) == 1 unless on() sum(leader_election_master_status)"),
            vec![
                ("up".to_owned(), set(&["job"])),
                ("leader_election_master_status".to_owned(), set(&[])),
            ]
        );
        assert_eq!(
            selectors("histogram_quantile(0.99, sum by (le, controller) (rate(x_bucket[5m])))"),
            vec![("x_bucket".to_owned(), set(&["le", "controller"]))]
        );
    }

    #[test]
    fn rule_templates_give_their_exprs_with_actions_replaced() {
        let template = "        - alert: A\n          expr: max(m{ {{- $sel -}} }) > {{ $r.n }}\n\
                        - alert: B\n          expr: |-\n            sum(a{ {{- $sel -}}, x=\"1\"})\n              / sum(b)\n          for: 5m\n";
        assert_eq!(
            rule_exprs(template),
            vec![
                "max(m{job=\"ccm\"}) > 1".to_owned(),
                "sum(a{job=\"ccm\", x=\"1\"}) / sum(b)".to_owned()
            ]
        );
    }

    #[test]
    fn an_exposition_lacking_a_metric_or_label_is_reported() {
        let text = "# HELP a_calls Calls.\n# TYPE a_calls counter\na_calls_total{operation=\"x\"} 1\n\
                    # TYPE b_seconds histogram\n# TYPE c gauge\n";
        let exposition = Exposition::parse(text);
        let used: Used = [
            (
                "a_calls_total".to_owned(),
                set(&["operation", "outcome", "job"]),
            ),
            ("b_seconds_bucket".to_owned(), set(&["le", "controller"])),
            ("c".to_owned(), set(&[])),
            ("d".to_owned(), set(&[])),
            ("up".to_owned(), set(&["job"])),
        ]
        .into();
        assert_eq!(
            exposition.missing(&used),
            vec![
                "label outcome of a_calls_total".to_owned(),
                "metric d".to_owned()
            ]
        );
    }

    #[test]
    fn the_chart_queries_parse_and_use_the_metrics_the_alerts_need() {
        let used = chart_metrics().expect("the chart's rules and dashboard read");
        for metric in [
            "ccm_node_uninitialized",
            "ccm_service_load_balancer_failing",
            "leader_election_master_status",
            "ccm_cloud_provider_calls_total",
            "ccm_service_load_balancers",
            "ccm_controller_running",
        ] {
            assert!(used.contains_key(metric), "{metric} in {used:?}");
        }
        assert!(used["ccm_service_load_balancer_failing"].contains("service"));
    }
}
