//! The Helm chart's ServiceAccount and RBAC for one provider, as
//! [`ApiServer::ccm_credentials`](crate::ApiServer::ccm_credentials) applies
//! them: read from [`RBAC_DIR_ENV`] when it is set (`cargo xtask` renders
//! every provider's there for tier 5), else rendered here by the helm that
//! xtask installs under `target/tools/helm/`. Neither is an error: the CCM
//! never silently runs as administrator instead.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

/// A directory holding `<provider>.yaml`: the chart's ServiceAccount and
/// RBAC for that provider, as `helm template` renders them (YAML or a JSON
/// `List`).
pub const RBAC_DIR_ENV: &str = "CCM_TEST_RBAC_DIR";
/// The release name and namespace the chart is rendered with, as xtask
/// renders it.
const RELEASE: &str = "ccm";
pub(crate) const RELEASE_NAMESPACE: &str = "kube-system";
/// The kinds taken from a render, with their plural and whether they are
/// namespaced.
const KINDS: [(&str, &str, bool); 5] = [
    ("ServiceAccount", "serviceaccounts", true),
    ("ClusterRole", "clusterroles", false),
    ("ClusterRoleBinding", "clusterrolebindings", false),
    ("Role", "roles", true),
    ("RoleBinding", "rolebindings", true),
];
/// How long a token handed to a CCM lives: longer than any test.
const TOKEN_SECONDS: i64 = 2 * 60 * 60;

/// One provider's ServiceAccount and the RBAC objects bound to it.
#[derive(Debug, Clone)]
pub(crate) struct ChartRbac {
    objects: Vec<Value>,
    /// The ServiceAccount's name, in [`RELEASE_NAMESPACE`].
    pub(crate) account: String,
}

impl ChartRbac {
    /// `provider`'s objects, from [`RBAC_DIR_ENV`] or helm.
    ///
    /// # Errors
    /// When neither is available (saying how to get them), helm fails, or
    /// the render holds no single ServiceAccount.
    pub(crate) async fn of(provider: &str) -> anyhow::Result<Self> {
        let (text, origin) = if let Some(dir) = std::env::var_os(RBAC_DIR_ENV) {
            let file = PathBuf::from(dir).join(format!("{provider}.yaml"));
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("{RBAC_DIR_ENV}: reading {}", file.display()))?;
            (text, file.display().to_string())
        } else {
            (
                render(provider).await?,
                format!("helm template ({provider})"),
            )
        };
        Self::from_manifests(&text).with_context(|| format!("the chart's RBAC from {origin}"))
    }

    /// The shadow's (`dryRun`) ServiceAccount and read-only RBAC, as helm
    /// renders `ci/dry-run-values.yaml`.
    ///
    /// # Errors
    /// When helm is missing or fails, or the render has no shadow account.
    pub(crate) async fn dry_run() -> anyhow::Result<Self> {
        let text = render("dry-run").await?;
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)?;
        let account = documents
            .iter()
            .filter(|d| d["kind"] == "ServiceAccount")
            .filter_map(|d| d["metadata"]["name"].as_str())
            .find(|name| name.ends_with("-dry-run"))
            .context("the chart rendered no -dry-run ServiceAccount with dryRun.enabled")?
            .to_owned();
        let objects = documents
            .into_iter()
            .filter(|doc| KINDS.iter().any(|(kind, ..)| doc["kind"] == *kind))
            .filter(|doc| {
                doc["metadata"]["name"]
                    .as_str()
                    .is_some_and(|name| name.starts_with(&account))
            })
            .collect();
        Ok(Self { objects, account })
    }

    /// The RBAC kinds among the YAML or JSON documents of `text` (a `List`'s
    /// items included).
    fn from_manifests(text: &str) -> anyhow::Result<Self> {
        let documents: Vec<Value> = serde_saphyr::from_multiple(text)?;
        let objects: Vec<Value> = documents
            .into_iter()
            .flat_map(|doc| match doc["items"].as_array() {
                Some(items) if doc["kind"] == "List" => items.clone(),
                _ => vec![doc],
            })
            .filter(|doc| KINDS.iter().any(|(kind, ..)| doc["kind"] == *kind))
            .collect();
        let accounts: Vec<&str> = objects
            .iter()
            .filter(|o| o["kind"] == "ServiceAccount")
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        let [account] = accounts[..] else {
            bail!("expected one ServiceAccount, found {accounts:?}");
        };
        Ok(Self {
            account: account.to_owned(),
            objects,
        })
    }

    /// Creates every object with `admin`, replacing one that exists (a
    /// second CCM of the same test).
    ///
    /// # Errors
    /// When the API server refuses an object.
    pub(crate) async fn apply(&self, admin: &kube::Client) -> anyhow::Result<()> {
        for object in &self.objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            let (_, plural, namespaced) = KINDS
                .iter()
                .find(|(k, ..)| *k == kind)
                .context("only known kinds are kept")?;
            let (group, version) = match object["apiVersion"].as_str().unwrap_or_default() {
                v if v.contains('/') => v.split_once('/').unwrap_or_default(),
                v => ("", v),
            };
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let mut dynamic: DynamicObject = serde_json::from_value(object.clone())?;
            let api: Api<DynamicObject> = if *namespaced {
                let namespace = dynamic
                    .metadata
                    .namespace
                    .get_or_insert_with(|| RELEASE_NAMESPACE.to_owned())
                    .clone();
                Api::namespaced_with(admin.clone(), &namespace, &resource)
            } else {
                Api::all_with(admin.clone(), &resource)
            };
            let name = dynamic.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), &dynamic).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let current = api.get(&name).await?;
                    dynamic.metadata.resource_version = current.metadata.resource_version;
                    api.replace(&name, &PostParams::default(), &dynamic)
                        .await
                        .with_context(|| format!("replacing {kind} {name}"))?;
                }
                Err(err) => return Err(err).with_context(|| format!("creating {kind} {name}")),
            }
        }
        Ok(())
    }

    /// A fresh token of the ServiceAccount, from TokenRequest.
    ///
    /// # Errors
    /// When the API server refuses the request.
    pub(crate) async fn token(&self, admin: &kube::Client) -> anyhow::Result<String> {
        let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), RELEASE_NAMESPACE);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let issued = accounts
            .create_token_request(&self.account, &PostParams::default(), &request)
            .await
            .with_context(|| format!("requesting a token of ServiceAccount {}", self.account))?;
        Ok(issued.status.context("TokenRequest without status")?.token)
    }

    /// Waits until the API server's authorizer grants what each binding
    /// binds: kube-apiserver's RBAC authorizer reads roles and bindings
    /// through informers, so a CCM started right after [`Self::apply`] can
    /// be refused for a moment. Asks with a SubjectAccessReview per binding
    /// (the first rule of the role it names), for at most 30 s.
    ///
    /// # Errors
    /// When a grant is still refused after that.
    pub(crate) async fn wait_effective(&self, admin: &kube::Client) -> anyhow::Result<()> {
        let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
        for attributes in self.granted() {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(self.user()),
                    groups: Some(vec![
                        "system:serviceaccounts".to_owned(),
                        format!("system:serviceaccounts:{RELEASE_NAMESPACE}"),
                        "system:authenticated".to_owned(),
                    ]),
                    resource_attributes: Some(attributes.clone()),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let what = format!("the chart's RBAC to grant {attributes:?}");
            crate::eventually(&what, Duration::from_secs(30), || async {
                let answer = reviews.create(&PostParams::default(), &review).await?;
                anyhow::Ok(answer.status.is_some_and(|s| s.allowed).then_some(()))
            })
            .await?;
        }
        Ok(())
    }

    /// One thing each binding grants: the first verb on the first resource
    /// of the first rule of the role it names, where it applies (none for a
    /// role whose first rule is on non-resource URLs).
    fn granted(&self) -> Vec<ResourceAttributes> {
        self.objects
            .iter()
            .filter(|o| {
                matches!(
                    o["kind"].as_str(),
                    Some("RoleBinding" | "ClusterRoleBinding")
                )
            })
            .filter_map(|binding| {
                let role = &binding["roleRef"];
                let rule =
                    self.objects.iter().find(|o| {
                        o["kind"] == role["kind"] && o["metadata"]["name"] == role["name"]
                    })?["rules"]
                        .get(0)?
                        .clone();
                let first = |key: &str| rule[key].get(0).and_then(Value::as_str).map(str::to_owned);
                // A rule on non-resource URLs is not asked about.
                first("resources")?;
                let namespace = (binding["kind"] == "RoleBinding").then(|| {
                    binding["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or(RELEASE_NAMESPACE)
                        .to_owned()
                });
                Some(ResourceAttributes {
                    group: first("apiGroups"),
                    resource: first("resources"),
                    verb: first("verbs"),
                    name: first("resourceNames"),
                    namespace,
                    ..ResourceAttributes::default()
                })
            })
            .collect()
    }

    /// The user the API server authenticates the ServiceAccount's tokens as.
    pub(crate) fn user(&self) -> String {
        format!("system:serviceaccount:{RELEASE_NAMESPACE}:{}", self.account)
    }
}

/// The workspace's root directory.
fn workspace_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The helm xtask installs: `target/tools/helm/helm` of the workspace's
/// target directory, as cargo chooses it.
fn helm() -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => workspace_root().join(dir),
        None => workspace_root().join("target"),
    };
    target.join("tools").join("helm").join("helm")
}

/// `helm template` of the chart with `ci/<provider>-values.yaml`, as
/// `cargo xtask` renders it.
async fn render(provider: &str) -> anyhow::Result<String> {
    let helm = helm();
    if !helm.is_file() {
        bail!(
            "the CCM runs under the Helm chart's RBAC, and there is no rendering of it: set \
             {RBAC_DIR_ENV} to a directory of rendered <provider>.yaml files, or install helm \
             at {} with `cargo xtask chart --static` (or `cargo xtask ci`)",
            helm.display()
        );
    }
    let chart = workspace_root()
        .join("charts")
        .join("cloud-controller-manager");
    let values = chart.join("ci").join(format!("{provider}-values.yaml"));
    anyhow::ensure!(values.is_file(), "no example values {}", values.display());
    let out = tokio::process::Command::new(&helm)
        .args(["template", RELEASE])
        .arg(&chart)
        .args(["--namespace", RELEASE_NAMESPACE, "-f"])
        .arg(&values)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {}", helm.display()))?;
    if !out.status.success() {
        bail!(
            "helm template -f {} failed ({}): {}",
            values.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_streams_and_json_lists_give_the_same_objects() {
        let yaml = "# Source: x\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: ccm\n  namespace: kube-system\n---\n\
                    apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ccm\n---\n\
                    apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: ccm\nrules: []\n";
        let json = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ccm", "namespace": "kube-system"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "ccm"}, "rules": []}
        ]}"#;
        let from_yaml = ChartRbac::from_manifests(yaml).unwrap();
        let from_json = ChartRbac::from_manifests(json).unwrap();
        assert_eq!(from_yaml.objects, from_json.objects);
        assert_eq!(from_yaml.account, "ccm");
        assert_eq!(from_yaml.user(), "system:serviceaccount:kube-system:ccm");
    }

    #[test]
    fn a_render_without_one_service_account_is_refused() {
        let err = ChartRbac::from_manifests("apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
        assert!(err.to_string().contains("one ServiceAccount"), "{err}");
    }
}
