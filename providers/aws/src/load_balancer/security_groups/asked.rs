//! The security groups a Service names for its Network Load Balancer:
//! `aws-load-balancer-security-groups`, which replace the ones the provider
//! would choose (its own managed group), and
//! `aws-load-balancer-extra-security-groups`, added to them.
//!
//! Upstream honours the first on NLBs only with `NLBSecurityGroupMode =
//! Managed` and ignores the second. Here both are honoured wherever AWS can
//! give them, and refused where it cannot, before anything changes: an NLB
//! gets security groups only when it is created with some, so a new one
//! needs the managed mode and one made without cannot gain them
//! (`ElbSecurityGroup`, as upstream, is for classic ELBs only). The
//! provider adds no rules to the groups it is given, and never deletes
//! them; its own group, once replaced, is deleted (`frontend`'s
//! `delete_detached_groups`).

use ccm_cloud_provider::CloudError;

use super::super::annotations::{self as key, Annotations, invalid};

/// The groups named by the Service's annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AskedGroups {
    /// `security-groups`: instead of the provider's choice.
    pub(crate) instead: Vec<String>,
    /// `extra-security-groups`: on top.
    pub(crate) extra: Vec<String>,
}

impl AskedGroups {
    /// Both annotations, each a comma-separated list of `sg-` IDs.
    ///
    /// # Errors
    /// [`CloudError::InvalidInput`] naming the annotation and the item that
    /// is not a security group ID.
    pub(crate) fn from_annotations(a: &Annotations<'_>) -> Result<Self, CloudError> {
        Ok(Self {
            instead: ids(a, key::SECURITY_GROUPS)?,
            extra: ids(a, key::EXTRA_SECURITY_GROUPS)?,
        })
    }

    /// Refuses groups the load balancer cannot have: `existing` tells
    /// whether it exists and `may_have_groups` whether it has (or, new, will
    /// be created with) security groups.
    ///
    /// # Errors
    /// [`CloudError::InvalidInput`] naming the annotation.
    pub(crate) fn check(&self, existing: bool, may_have_groups: bool) -> Result<(), CloudError> {
        if may_have_groups {
            return Ok(());
        }
        let field = if self.instead.is_empty() {
            if self.extra.is_empty() {
                return Ok(());
            }
            key::EXTRA_SECURITY_GROUPS
        } else {
            key::SECURITY_GROUPS
        };
        Err(invalid(
            field,
            if existing {
                "this Network Load Balancer was created without security groups, and AWS \
                 cannot add any to it; delete and recreate the Service (or create a new one and \
                 move traffic to it) to give it security groups"
            } else {
                "a new Network Load Balancer gets security groups only with \
                 `NLBSecurityGroupMode = Managed` in [Global] of the cloud config, as \
                 upstream"
            },
        ))
    }

    /// The load balancer's groups: `chosen` (the provider's choice) or the
    /// ones named instead, then the extra ones, each once.
    pub(crate) fn apply(&self, chosen: Vec<String>) -> Vec<String> {
        let base = if self.instead.is_empty() {
            chosen
        } else {
            self.instead.clone()
        };
        let mut out: Vec<String> = Vec::new();
        for id in base.into_iter().chain(self.extra.iter().cloned()) {
            if !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }
}

/// Upstream's `getSGListFromAnnotation`: trimmed items, blanks dropped, so
/// an empty value names none.
fn ids(a: &Annotations<'_>, field: &str) -> Result<Vec<String>, CloudError> {
    a.get(field)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(|id| {
            if id.starts_with("sg-") {
                Ok(id.to_owned())
            } else {
                Err(invalid(
                    field,
                    format!("expected security group IDs such as sg-0123456789abcdef0, got `{id}`"),
                ))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn asked(pairs: &[(&str, &str)]) -> Result<AskedGroups, CloudError> {
        let raw: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        AskedGroups::from_annotations(&Annotations(&raw))
    }

    #[test]
    fn named_groups_replace_the_choice_and_extra_ones_are_added_once() {
        let both = asked(&[
            (key::SECURITY_GROUPS, "sg-a, sg-b"),
            (key::EXTRA_SECURITY_GROUPS, "sg-b,sg-c"),
        ])
        .expect("valid");
        assert_eq!(both.apply(vec!["sg-own".into()]), ["sg-a", "sg-b", "sg-c"]);
        let extra = asked(&[(key::EXTRA_SECURITY_GROUPS, "sg-c")]).expect("valid");
        assert_eq!(extra.apply(vec!["sg-own".into()]), ["sg-own", "sg-c"]);
        assert_eq!(
            asked(&[]).expect("valid").apply(Vec::new()),
            Vec::<String>::new()
        );
        let blank = asked(&[(key::SECURITY_GROUPS, " , ")]).expect("valid");
        assert_eq!(
            blank,
            AskedGroups::default(),
            "blank names none, as upstream"
        );
    }

    #[test]
    fn ids_that_are_not_security_groups_are_refused() {
        let err = asked(&[(key::SECURITY_GROUPS, "sg-a,web")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid {}: expected security group IDs such as sg-0123456789abcdef0, got `web`",
                key::SECURITY_GROUPS
            )
        );
    }

    #[test]
    fn groups_a_load_balancer_cannot_have_are_refused_naming_the_annotation() {
        let extra = asked(&[(key::EXTRA_SECURITY_GROUPS, "sg-c")]).expect("valid");
        assert!(extra.check(true, true).is_ok());
        let new = extra.check(false, false).unwrap_err();
        assert!(
            matches!(&new, CloudError::InvalidInput { field, message }
                if field == key::EXTRA_SECURITY_GROUPS && message.contains("NLBSecurityGroupMode = Managed")),
            "{new:?}"
        );
        let instead = asked(&[
            (key::SECURITY_GROUPS, "sg-a"),
            (key::EXTRA_SECURITY_GROUPS, "sg-c"),
        ])
        .expect("valid");
        let old = instead.check(true, false).unwrap_err();
        assert!(
            matches!(&old, CloudError::InvalidInput { field, message }
                if field == key::SECURITY_GROUPS && message.contains("cannot add any")),
            "{old:?}"
        );
        assert!(asked(&[]).expect("valid").check(false, false).is_ok());
    }
}
