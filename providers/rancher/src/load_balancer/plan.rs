//! What pointing a load balancer at its targets changes, decided from what
//! Rancher holds: a pure plan, carried out by `converge`.

use std::collections::BTreeSet;

use crate::cattle::PortRule;

/// The changes that point a load balancer at its targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// The port rules it is to have, sorted.
    pub(super) rules: Vec<PortRule>,
    /// Whether its service links are set first: its targets changed.
    pub(super) set_links: bool,
    /// Whether its rules and its owner are written.
    pub(super) update: bool,
    /// The external services its rules used and no longer use.
    pub(super) dropped: BTreeSet<String>,
}

/// The plan for a load balancer with port rules `current`, whose owner is
/// `recorded` or not, to forward each of `forwards` (Service port, node
/// port) to each external service of `targets` (IDs).
pub(super) fn plan(
    current: &[PortRule],
    recorded: bool,
    targets: &[String],
    forwards: &[(i64, i64)],
) -> Plan {
    let mut rules: Vec<PortRule> = targets
        .iter()
        .flat_map(|id| {
            forwards.iter().map(|(port, node_port)| PortRule {
                source_port: *port,
                target_port: *node_port,
                service_id: id.clone(),
                protocol: "tcp".to_owned(),
            })
        })
        .collect();
    rules.sort();
    let mut current = current.to_vec();
    current.sort();
    let changed = current != rules;
    let kept: BTreeSet<&str> = rules.iter().map(|r| r.service_id.as_str()).collect();
    let dropped = current
        .into_iter()
        .map(|r| r.service_id)
        .filter(|id| !kept.contains(id.as_str()))
        .collect();
    Plan {
        rules,
        set_links: changed,
        update: changed || !recorded,
        dropped,
    }
}

#[cfg(test)]
mod tests {
    use proptest::collection::{btree_set, vec};
    use proptest::prelude::*;

    use super::*;

    fn ids() -> impl Strategy<Value = Vec<String>> {
        btree_set("1s[0-9]{1,2}", 0..6).prop_map(|ids| ids.into_iter().collect())
    }

    fn forwards() -> impl Strategy<Value = Vec<(i64, i64)>> {
        btree_set((1..=65535i64, 30000..=32767i64), 1..4).prop_map(|f| f.into_iter().collect())
    }

    fn rules() -> impl Strategy<Value = Vec<PortRule>> {
        vec(("1s[0-9]{1,2}", 1..=65535i64, 30000..=32767i64), 0..8).prop_map(|rules| {
            rules
                .into_iter()
                .map(|(service_id, source_port, target_port)| PortRule {
                    source_port,
                    target_port,
                    service_id,
                    protocol: "tcp".to_owned(),
                })
                .collect()
        })
    }

    proptest! {
        /// Once carried out, the plan leaves nothing to do.
        #[test]
        fn a_carried_out_plan_plans_nothing(
            current in rules(), recorded in any::<bool>(), targets in ids(), forwards in forwards(),
        ) {
            let first = plan(&current, recorded, &targets, &forwards);
            let again = plan(&first.rules, recorded || first.update, &targets, &forwards);
            prop_assert!(!again.update && !again.set_links, "{again:?}");
            prop_assert!(again.dropped.is_empty());
            prop_assert_eq!(again.rules, first.rules);
        }

        /// Every target gets every forward and nothing else gets any; an
        /// external service is dropped exactly when it leaves the rules.
        #[test]
        fn the_rules_are_the_targets_forwards_and_only_those_who_left_are_dropped(
            current in rules(), recorded in any::<bool>(), targets in ids(), forwards in forwards(),
        ) {
            let p = plan(&current, recorded, &targets, &forwards);
            prop_assert_eq!(p.rules.len(), targets.len() * forwards.len());
            for id in &targets {
                for (port, node_port) in &forwards {
                    prop_assert!(p.rules.iter().any(|r| &r.service_id == id
                        && r.source_port == *port && r.target_port == *node_port));
                }
            }
            for id in &p.dropped {
                prop_assert!(!targets.contains(id));
                prop_assert!(current.iter().any(|r| &r.service_id == id));
            }
            for r in &current {
                prop_assert!(targets.contains(&r.service_id) || p.dropped.contains(&r.service_id));
            }
            prop_assert!(!p.set_links || p.update, "links are set only with the rules");
        }
    }
}
