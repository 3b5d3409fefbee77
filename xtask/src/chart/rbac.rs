//! The chart's rules as the API server reads them: which rendered rules
//! grant a request, and which granted permissions no request used (the API
//! server itself decides what is refused).

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{Context, bail};
use serde_json::Value;

/// One rule of a ClusterRole or Role bound to the CCM's service account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) api_groups: Vec<String>,
    /// `nodes`, or `nodes/status` for a subresource.
    pub(crate) resources: Vec<String>,
    /// Empty: any object.
    pub(crate) resource_names: Vec<String>,
    pub(crate) verbs: Vec<String>,
    /// The Role's namespace; `None` for a ClusterRole (every namespace).
    pub(crate) namespace: Option<String>,
    /// A role kube-apiserver creates (the chart only binds it): never
    /// reported as more than least privilege.
    pub(crate) bootstrap: bool,
}

/// One rule of a bootstrap role: group, resource, object name (empty for
/// any) and verbs.
type BootstrapRule = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

/// A role kube-apiserver bootstraps that the chart binds: kind, name, rules.
type BootstrapRole = (&'static str, &'static str, &'static [BootstrapRule]);

/// The roles kube-apiserver bootstraps that the chart binds.
const BOOTSTRAP_ROLES: [BootstrapRole; 2] = [
    (
        "ClusterRole",
        "system:auth-delegator",
        &[
            ("authentication.k8s.io", "tokenreviews", "", &["create"]),
            (
                "authorization.k8s.io",
                "subjectaccessreviews",
                "",
                &["create"],
            ),
        ],
    ),
    (
        "Role",
        "extension-apiserver-authentication-reader",
        &[(
            "",
            "configmaps",
            "extension-apiserver-authentication",
            &["get", "list", "watch"],
        )],
    ),
];

/// The rules of bootstrap role `kind/name`, if it is one.
fn bootstrap_rules(kind: &str, name: &str, namespace: Option<&String>) -> Option<Vec<Rule>> {
    let (_, _, rules) = BOOTSTRAP_ROLES
        .iter()
        .find(|(k, n, _)| *k == kind && *n == name)?;
    Some(
        rules
            .iter()
            .map(|(group, resource, object, verbs)| Rule {
                api_groups: vec![(*group).to_owned()],
                resources: vec![(*resource).to_owned()],
                resource_names: if object.is_empty() {
                    Vec::new()
                } else {
                    vec![(*object).to_owned()]
                },
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                namespace: namespace.cloned(),
                bootstrap: true,
            })
            .collect(),
    )
}

/// One resource request the CCM sent, as the test API server logged it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Request {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    /// Empty for cluster-scoped objects and requests across namespaces.
    pub(crate) namespace: String,
    /// Empty for collections.
    pub(crate) name: String,
}

impl Request {
    /// RBAC's name for what was requested: `resource` or `resource/subresource`.
    fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let scope = if self.namespace.is_empty() {
            "cluster-wide".to_owned()
        } else {
            format!("in {}", self.namespace)
        };
        write!(f, "{} {group}/{} {scope}", self.verb, self.resource_path())?;
        if !self.name.is_empty() {
            write!(f, " ({})", self.name)?;
        }
        Ok(())
    }
}

impl Rule {
    /// Whether this rule allows `request` (RBAC's matching, without `*`,
    /// which the chart never uses).
    pub(crate) fn grants(&self, request: &Request) -> bool {
        let scoped = self
            .namespace
            .as_ref()
            .is_none_or(|ns| *ns == request.namespace);
        let named = self.resource_names.is_empty()
            || (!request.name.is_empty() && self.resource_names.contains(&request.name));
        scoped
            && named
            && self.api_groups.contains(&request.group)
            && self.resources.contains(&request.resource_path())
            && self.verbs.contains(&request.verb)
    }

    /// Each (group, resource, verb) this rule grants, one string each.
    fn permissions(&self) -> Vec<String> {
        let scope = self
            .namespace
            .as_ref()
            .map_or_else(|| "cluster-wide".to_owned(), |ns| format!("in {ns}"));
        let names = if self.resource_names.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.resource_names.join(", "))
        };
        let mut out = Vec::new();
        for group in &self.api_groups {
            let group = if group.is_empty() { "core" } else { group };
            for resource in &self.resources {
                for verb in &self.verbs {
                    out.push(format!("{verb} {group}/{resource} {scope}{names}"));
                }
            }
        }
        out
    }

    /// Whether this rule grants `verb` on `group/resource` to some request in `requests`.
    fn used(&self, group: &str, resource: &str, verb: &str, requests: &[Request]) -> bool {
        let narrowed = Self {
            api_groups: vec![group.to_owned()],
            resources: vec![resource.to_owned()],
            verbs: vec![verb.to_owned()],
            ..self.clone()
        };
        requests.iter().any(|r| narrowed.grants(r))
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The rules bound to service account `namespace/account` by the rendered
/// ClusterRoleBindings and RoleBindings in `docs`. Fails on a `*` anywhere.
pub(crate) fn bound_rules(
    docs: &[Value],
    namespace: &str,
    account: &str,
) -> anyhow::Result<Vec<Rule>> {
    let binds_account = |binding: &Value| {
        binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == namespace
            })
    };
    let mut rules = Vec::new();
    for binding in docs.iter().filter(|d| {
        (d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding") && binds_account(d)
    }) {
        let role_kind = binding["roleRef"]["kind"]
            .as_str()
            .context("a binding without roleRef.kind")?;
        let role_name = &binding["roleRef"]["name"];
        let role_namespace = (binding["kind"] == "RoleBinding").then(|| {
            binding["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        });
        if let Some(name) = role_name.as_str()
            && let Some(bootstrap) = bootstrap_rules(role_kind, name, role_namespace.as_ref())
        {
            rules.extend(bootstrap);
            continue;
        }
        let role = docs
            .iter()
            .find(|d| {
                d["kind"] == role_kind
                    && d["metadata"]["name"] == *role_name
                    && (role_kind == "ClusterRole"
                        || d["metadata"]["namespace"].as_str() == role_namespace.as_deref())
            })
            .with_context(|| {
                format!(
                    "{} {} binds {role_kind} {role_name}, which the chart does not render",
                    binding["kind"], binding["metadata"]["name"]
                )
            })?;
        for rule in role["rules"].as_array().into_iter().flatten() {
            let rule = Rule {
                api_groups: strings(&rule["apiGroups"]),
                resources: strings(&rule["resources"]),
                resource_names: strings(&rule["resourceNames"]),
                verbs: strings(&rule["verbs"]),
                namespace: role_namespace.clone(),
                bootstrap: false,
            };
            if [&rule.api_groups, &rule.resources, &rule.verbs]
                .iter()
                .any(|list| list.iter().any(|s| s.contains('*')))
            {
                bail!("{role_kind} {role_name} grants a wildcard: {rule:?}");
            }
            rules.push(rule);
        }
    }
    if rules.is_empty() {
        bail!("no rules are bound to service account {namespace}/{account}");
    }
    Ok(rules)
}

/// What the comparison found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Findings {
    /// Permissions no request used: more than least privilege.
    pub(crate) unused: BTreeSet<String>,
    /// Permissions used, for the report.
    pub(crate) used: BTreeSet<String>,
}

/// Which permissions of `rules` the granted `requests` used.
pub(crate) fn compare(rules: &[Rule], requests: &[Request]) -> Findings {
    let mut findings = Findings::default();
    for rule in rules.iter().filter(|r| !r.bootstrap) {
        for group in &rule.api_groups {
            for resource in &rule.resources {
                for verb in &rule.verbs {
                    let one = Rule {
                        api_groups: vec![group.clone()],
                        resources: vec![resource.clone()],
                        verbs: vec![verb.clone()],
                        ..rule.clone()
                    };
                    let permission = one.permissions().remove(0);
                    if rule.used(group, resource, verb, requests) {
                        findings.used.insert(permission);
                    } else {
                        findings.unused.insert(permission);
                    }
                }
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Request {
        Request {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn docs() -> Vec<Value> {
        let subjects =
            json!([{ "kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system" }]);
        vec![
            json!({ "kind": "ClusterRole", "metadata": { "name": "ccm" }, "rules": [
                { "apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"] },
                { "apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"] },
            ]}),
            json!({ "kind": "ClusterRoleBinding", "metadata": { "name": "ccm" }, "roleRef": { "kind": "ClusterRole", "name": "ccm" }, "subjects": subjects }),
            json!({ "kind": "Role", "metadata": { "name": "ccm", "namespace": "kube-system" }, "rules": [
                { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"] },
                { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["ccm"], "verbs": ["get", "update"] },
            ]}),
            json!({ "kind": "RoleBinding", "metadata": { "name": "ccm", "namespace": "kube-system" }, "roleRef": { "kind": "Role", "name": "ccm" }, "subjects": subjects }),
        ]
    }

    #[test]
    fn a_role_grants_only_in_its_namespace_and_only_the_named_objects() {
        let rules = bound_rules(&docs(), "kube-system", "ccm").unwrap();
        let granted = |r: &Request| rules.iter().any(|rule| rule.grants(r));
        assert!(granted(&request(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "ccm"
        )));
        assert!(granted(&request(
            "create",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            ""
        )));
        assert!(
            !granted(&request(
                "get",
                "coordination.k8s.io",
                "leases",
                "",
                "default",
                "ccm"
            )),
            "another namespace"
        );
        assert!(
            !granted(&request(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-system",
                "other"
            )),
            "another lease"
        );
    }

    #[test]
    fn a_subresource_needs_its_own_rule() {
        let rules = bound_rules(&docs(), "kube-system", "ccm").unwrap();
        let granted = |r: &Request| rules.iter().any(|rule| rule.grants(r));
        assert!(granted(&request(
            "patch", "", "nodes", "status", "", "node-1"
        )));
        assert!(
            !granted(&request("patch", "", "nodes", "", "", "node-1")),
            "patch of the node itself is not granted"
        );
    }

    #[test]
    fn unused_permissions_are_reported() {
        let rules = bound_rules(&docs(), "kube-system", "ccm").unwrap();
        let requests = [
            request("list", "", "nodes", "", "", ""),
            request("watch", "", "nodes", "", "", ""),
            request("patch", "", "nodes", "status", "", "node-1"),
            request(
                "create",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-system",
                "",
            ),
            request(
                "get",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-system",
                "ccm",
            ),
        ];
        let findings = compare(&rules, &requests);
        assert_eq!(
            findings.unused.iter().cloned().collect::<Vec<_>>(),
            ["update coordination.k8s.io/leases in kube-system (ccm)"]
        );
        assert!(
            findings
                .used
                .contains("get coordination.k8s.io/leases in kube-system (ccm)")
        );
    }

    #[test]
    fn wildcards_and_unbound_accounts_are_errors() {
        let mut wild = docs();
        wild[0]["rules"][0]["verbs"] = json!(["*"]);
        assert!(
            bound_rules(&wild, "kube-system", "ccm")
                .unwrap_err()
                .to_string()
                .contains("wildcard")
        );
        assert!(bound_rules(&docs(), "kube-system", "someone-else").is_err());
    }
}
