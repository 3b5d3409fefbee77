//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<group>` and
//! `/apis/<group>/<version>`, in the legacy (unaggregated) format, which
//! kubectl and kube fall back to when the aggregated format is not served.

use serde_json::{Value, json};

use super::route::Discovery;
use crate::resources::{self, GROUPS, REVIEWS, VERBS};
use crate::status::ApiError;

/// The Kubernetes release this server stands in for.
const GIT_VERSION: &str = "v1.37.0";

/// The JSON body for a discovery path.
pub(crate) fn body(path: &Discovery, address: &str) -> Result<Value, ApiError> {
    Ok(match path {
        Discovery::Root => json!({"paths": root_paths()}),
        Discovery::Version => json!({
            "major": "1",
            "minor": "37",
            "gitVersion": GIT_VERSION,
            "gitCommit": "test-apiserver",
            "gitTreeState": "clean",
            "buildDate": "2025-04-23T00:00:00Z",
            "goVersion": "go1.24.2",
            "compiler": "gc",
            "platform": "linux/amd64"
        }),
        Discovery::CoreVersions => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]
        }),
        Discovery::Groups => json!({
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": GROUPS.iter().map(|g| group(g)).collect::<Vec<_>>()
        }),
        Discovery::Group(g) => {
            let mut group = group(g);
            group["kind"] = json!("APIGroup");
            group["apiVersion"] = json!("v1");
            group
        }
        Discovery::Resources(g, v) => resource_list(g, v),
        Discovery::Health => json!("ok"),
        Discovery::OpenApiV3 => super::openapi::root(),
        Discovery::OpenApiV3Document(g, v) => {
            super::openapi::document(g, v).ok_or_else(ApiError::no_such_path)?
        }
        Discovery::OpenApi | Discovery::OpenApiV2 => {
            return Err(ApiError::new(
                404,
                "NotFound",
                "test-apiserver serves OpenAPI at /openapi/v2 and /openapi/v3 only",
            ));
        }
    })
}

fn group(name: &str) -> Value {
    let version = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
    json!({"name": name, "versions": [version], "preferredVersion": version})
}

fn resource_list(group: &str, version: &str) -> Value {
    let mut list = Vec::new();
    for r in resources::in_group_version(group, version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": VERBS,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        list.push(entry);
        for sub in r.subresources {
            let verbs: &[&str] = match *sub {
                "finalize" => &["update"],
                "token" => &["create"],
                _ => &["get", "patch", "update"],
            };
            let mut entry = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": verbs,
            });
            if *sub == "token" {
                entry["group"] = json!("authentication.k8s.io");
                entry["version"] = json!("v1");
                entry["kind"] = json!("TokenRequest");
            }
            list.push(entry);
        }
    }
    for r in REVIEWS
        .iter()
        .filter(|r| r.group == group && version == "v1")
    {
        list.push(json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": false,
            "kind": r.kind,
            "verbs": ["create"],
        }));
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list})
}

fn root_paths() -> Vec<String> {
    let mut paths = vec!["/api".to_owned(), "/api/v1".to_owned(), "/apis".to_owned()];
    for g in GROUPS {
        paths.push(format!("/apis/{g}"));
        paths.push(format!("/apis/{g}/v1"));
    }
    paths.extend(["/healthz", "/livez", "/readyz", "/version"].map(String::from));
    paths
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        APIGroupList, APIResourceList, APIVersions,
    };

    use super::*;

    #[test]
    fn discovery_documents_decode_as_the_kubernetes_types() {
        let core: APIResourceList =
            serde_json::from_value(body(&Discovery::Resources("", "v1"), "x").expect("served"))
                .expect("APIResourceList");
        assert!(core.resources.iter().any(|r| r.name == "nodes/status"));
        let token = core
            .resources
            .iter()
            .find(|r| r.name == "serviceaccounts/token")
            .map(|r| (r.kind.as_str(), r.group.as_deref(), r.verbs.clone()));
        assert_eq!(
            token,
            Some((
                "TokenRequest",
                Some("authentication.k8s.io"),
                vec!["create".to_owned()]
            ))
        );
        let authn: APIResourceList = serde_json::from_value(
            body(&Discovery::Resources("authentication.k8s.io", "v1"), "x").expect("served"),
        )
        .expect("APIResourceList");
        assert_eq!(authn.resources[0].name, "tokenreviews");
        let groups: APIGroupList =
            serde_json::from_value(body(&Discovery::Groups, "x").expect("served"))
                .expect("APIGroupList");
        assert_eq!(groups.groups.len(), GROUPS.len());
        let _: APIVersions =
            serde_json::from_value(body(&Discovery::CoreVersions, "x").expect("served"))
                .expect("APIVersions");
    }

    #[test]
    fn groups_are_listed_in_kube_apiservers_priority_order() {
        let groups: APIGroupList =
            serde_json::from_value(body(&Discovery::Groups, "x").expect("served"))
                .expect("APIGroupList");
        let names: Vec<&str> = groups.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "events.k8s.io",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "certificates.k8s.io",
                "rbac.authorization.k8s.io",
                "admissionregistration.k8s.io",
                "coordination.k8s.io",
                "discovery.k8s.io",
            ]
        );
        let admission: APIResourceList = serde_json::from_value(
            body(
                &Discovery::Resources("admissionregistration.k8s.io", "v1"),
                "x",
            )
            .expect("served"),
        )
        .expect("APIResourceList");
        let names: Vec<&str> = admission
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(names, ["validatingwebhookconfigurations"]);
        assert!(!admission.resources[0].namespaced);
        assert_eq!(admission.resources[0].short_names, None);
    }
}
