//! The known differences between what upstream's binary and ours leave
//! behind ([`crate::outcome`]): each is on purpose or belongs to an open
//! issue, and says why. Any other difference is a regression: the quick
//! run in `cargo xtask ci` fails on it, naming the fact.

use crate::outcome::Outcome;

/// One fact that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    pub(crate) fact: String,
    pub(crate) upstream: Option<String>,
    pub(crate) ours: Option<String>,
}

/// Known differences: a fact (or, ending in `*`, a fact prefix) and why.
const KNOWN: &[(&str, &str)] = &[
    (
        "event Node Normal Synced",
        "upstream's cloud-node controller records a `Synced` Event for each node it initializes (a hundred Events for a hundred nodes); ours records Events for failures and changes an operator acts on, not for routine success",
    ),
    (
        "lb scheme",
        "moto's artifact: upstream leaves `Scheme` out of `CreateLoadBalancer` for an internet-facing load balancer (AWS's default) and moto then describes none; ours names it. On AWS both read `internet-facing`",
    ),
    (
        "lb attribute access_logs.s3.enabled",
        "moto's artifact: upstream writes `access_logs.s3.enabled=false` on every create (its one `ModifyLoadBalancerAttributes`), and moto lists only attributes once written; ours writes only what differs from AWS's defaults, and on AWS both read `false`",
    ),
];

/// Why `fact` may differ, when it is a known difference.
pub(crate) fn why(fact: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .find(|(pattern, _)| match pattern.strip_suffix('*') {
            Some(prefix) => fact.starts_with(prefix),
            None => fact == *pattern,
        })
        .map(|(_, why)| *why)
}

/// Every fact that differs, in fact order.
pub(crate) fn all(upstream: &Outcome, ours: &Outcome) -> Vec<Difference> {
    let facts: std::collections::BTreeSet<&String> = upstream.keys().chain(ours.keys()).collect();
    facts
        .into_iter()
        .filter(|fact| upstream.get(*fact) != ours.get(*fact))
        .map(|fact| Difference {
            fact: fact.clone(),
            upstream: upstream.get(fact).cloned(),
            ours: ours.get(fact).cloned(),
        })
        .collect()
}

/// The differences that are not known.
pub(crate) fn unexplained(upstream: &Outcome, ours: &Outcome) -> Vec<Difference> {
    all(upstream, ours)
        .into_iter()
        .filter(|d| why(&d.fact).is_none())
        .collect()
}

/// The report's section: how many facts were compared, and each
/// difference with why.
pub(crate) fn section(upstream: &Outcome, ours: &Outcome) -> String {
    let differences = all(upstream, ours);
    let compared = upstream.keys().filter(|k| ours.contains_key(*k)).count();
    let mut text = format!(
        "\n## What each left behind\n\n{compared} facts were compared (the first node's labels, annotations, addresses, taints and conditions; the Service's finalizers, annotations and status; the Events recorded; the load balancer's, listener's and target group's settings, attributes and tags; the security groups made and the node group's rules; the routes; the instances' source/destination check). {} differ{}\n",
        differences.len(),
        if differences.is_empty() { "." } else { ":" }
    );
    if differences.is_empty() {
        return text;
    }
    text.push_str("\n| fact | upstream | ours | why |\n|---|---|---|---|\n");
    let shown = |v: &Option<String>| match v {
        None => "-".to_owned(),
        Some(v) if v.is_empty() => "(empty)".to_owned(),
        Some(v) => format!("`{}`", v.replace('|', "\\|")),
    };
    for d in differences {
        text.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            d.fact,
            shown(&d.upstream),
            shown(&d.ours),
            why(&d.fact).unwrap_or("**not explained**"),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(facts: &[(&str, &str)]) -> Outcome {
        facts
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn only_facts_that_differ_are_differences() {
        let upstream = outcome(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let ours = outcome(&[("a", "1"), ("b", "two"), ("d", "4")]);
        let facts: Vec<_> = all(&upstream, &ours)
            .into_iter()
            .map(|d| (d.fact, d.upstream, d.ours))
            .collect();
        assert_eq!(
            facts,
            vec![
                ("b".to_owned(), Some("2".to_owned()), Some("two".to_owned())),
                ("c".to_owned(), Some("3".to_owned()), None),
                ("d".to_owned(), None, Some("4".to_owned())),
            ]
        );
    }

    #[test]
    fn known_differences_are_explained_and_others_are_not() {
        let upstream = outcome(&[
            ("event Node Normal Synced", "recorded"),
            ("lb type", "network"),
        ]);
        let ours = outcome(&[("lb type", "application")]);
        let unexplained = unexplained(&upstream, &ours);
        assert_eq!(unexplained.len(), 1);
        assert_eq!(unexplained[0].fact, "lb type");
        let text = section(&upstream, &ours);
        assert!(text.contains("1 facts were compared"), "{text}");
        assert!(
            text.contains("| lb type | `network` | `application` | **not explained** |"),
            "{text}"
        );
        assert!(
            text.contains("| event Node Normal Synced | `recorded` | - | upstream's"),
            "{text}"
        );
    }
}
