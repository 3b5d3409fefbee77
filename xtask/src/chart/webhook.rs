//! The admission webhook's certificates in the RBAC scenario: with
//! self-managed certificates (`--webhook-cert-secret`), the CCM fills the
//! chart's empty Secret and sets the configuration's caBundle, under the
//! chart's webhook Role and ClusterRole, which name those two objects only.

use std::net::SocketAddr;

use anyhow::{Context, ensure};
use serde_json::Value;

use super::rbac::Rule;
use crate::http;

/// The keys the CCM writes into its Secret.
const SECRET_KEYS: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];
const CONFIGURATIONS: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// The value of `--name=` among `args`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(&format!("--{name}=")))
}

/// Where the CCM keeps its own webhook certificates, by its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SelfManaged {
    /// `--webhook-cert-secret=NAMESPACE/NAME`.
    pub(crate) secret_namespace: String,
    pub(crate) secret_name: String,
    /// `--webhook-configuration=NAME`.
    pub(crate) configuration: String,
}

impl SelfManaged {
    /// `None` when the CCM serves no webhook or takes its certificate from
    /// files (cert-manager).
    pub(crate) fn from_args(args: &[String]) -> anyhow::Result<Option<Self>> {
        let Some(secret) = flag(args, "webhook-cert-secret") else {
            return Ok(None);
        };
        let (namespace, name) = secret
            .split_once('/')
            .with_context(|| format!("--webhook-cert-secret={secret} is not NAMESPACE/NAME"))?;
        let configuration = flag(args, "webhook-configuration")
            .context("--webhook-cert-secret without --webhook-configuration")?;
        Ok(Some(Self {
            secret_namespace: namespace.to_owned(),
            secret_name: name.to_owned(),
            configuration: configuration.to_owned(),
        }))
    }

    /// What the CCM needs for them, and no more: get and update of the one
    /// Secret, in its namespace, and of the one configuration (it reads
    /// each, then replaces it).
    pub(crate) fn rules(&self) -> Vec<Rule> {
        let rule = |group: &str, resource: &str, name: &str, verbs: &[&str], namespace| Rule {
            api_groups: vec![group.to_owned()],
            resources: vec![resource.to_owned()],
            resource_names: vec![name.to_owned()],
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            namespace,
            bootstrap: false,
        };
        vec![
            rule(
                "",
                "secrets",
                &self.secret_name,
                &["get", "update"],
                Some(self.secret_namespace.clone()),
            ),
            rule(
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                &self.configuration,
                &["get", "update"],
                None,
            ),
        ]
    }
}

/// The chart's empty Secret and its configuration without a caBundle, as
/// rendered, for the scenario to create before the CCM starts: it gets and
/// updates them and never creates them.
#[derive(Debug)]
pub(crate) struct Certificates {
    names: SelfManaged,
    /// Each object with the API path of its collection.
    objects: Vec<(String, Value)>,
}

impl Certificates {
    /// The objects `args` name among `docs`; `None` when the CCM does not
    /// keep its own certificates.
    pub(crate) fn from_render(docs: &[Value], args: &[String]) -> anyhow::Result<Option<Self>> {
        let Some(names) = SelfManaged::from_args(args)? else {
            return Ok(None);
        };
        let named = |kind: &str, name: &str| {
            docs.iter()
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
                .cloned()
                .with_context(|| {
                    format!("the chart renders no {kind} {name}, which the CCM's arguments name")
                })
        };
        let objects = vec![
            (
                format!("/api/v1/namespaces/{}/secrets", names.secret_namespace),
                named("Secret", &names.secret_name)?,
            ),
            (
                CONFIGURATIONS.to_owned(),
                named("ValidatingWebhookConfiguration", &names.configuration)?,
            ),
        ];
        Ok(Some(Self { names, objects }))
    }

    /// Creates the objects with `token` (an administrator's).
    pub(crate) fn create(&self, api: SocketAddr, token: &str) -> anyhow::Result<()> {
        for (path, object) in &self.objects {
            let response = http::request_as(
                api,
                "POST",
                path,
                Some(("application/json", &object.to_string())),
                Some(token),
            )?;
            ensure!(
                response.status == 201,
                "creating {} {}: POST {path}: HTTP {}: {}",
                object["kind"],
                object["metadata"]["name"],
                response.status,
                response.body
            );
        }
        Ok(())
    }

    /// Whether the CCM has written its certificates into the Secret and its
    /// CA into every webhook of the configuration (read as xtask). `Err`
    /// says what is still missing.
    pub(crate) fn issued(&self, api: SocketAddr) -> anyhow::Result<()> {
        let names = &self.names;
        let secret = read(
            api,
            &format!(
                "/api/v1/namespaces/{}/secrets/{}",
                names.secret_namespace, names.secret_name
            ),
        )?;
        let configuration = read(api, &format!("{CONFIGURATIONS}/{}", names.configuration))?;
        certificates_in_place(&secret, &configuration)
    }
}

fn read(api: SocketAddr, path: &str) -> anyhow::Result<Value> {
    let response = http::get(api, path)?;
    ensure!(
        response.status == 200,
        "GET {path}: HTTP {}: {}",
        response.status,
        response.body
    );
    serde_json::from_str(&response.body).with_context(|| format!("GET {path}: not JSON"))
}

/// The Secret holds a CA, a certificate and its key, and every webhook of
/// the configuration trusts that CA (both base64 of the same PEM).
fn certificates_in_place(secret: &Value, configuration: &Value) -> anyhow::Result<()> {
    let data = &secret["data"];
    let missing: Vec<&str> = SECRET_KEYS
        .into_iter()
        .filter(|key| data[*key].as_str().is_none_or(str::is_empty))
        .collect();
    ensure!(
        missing.is_empty(),
        "the Secret lacks {}",
        missing.join(", ")
    );
    let webhooks = configuration["webhooks"]
        .as_array()
        .filter(|w| !w.is_empty())
        .context("the configuration has no webhooks")?;
    for webhook in webhooks {
        ensure!(
            webhook["clientConfig"]["caBundle"] == data["ca.crt"],
            "the caBundle of webhook {} is not the Secret's ca.crt",
            webhook["name"]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn self_managed() -> SelfManaged {
        SelfManaged::from_args(&args(&[
            "--webhooks=service-annotations",
            "--webhook-cert-secret=kube-system/ccm-webhook-cert",
            "--webhook-service=kube-system/ccm-webhook",
            "--webhook-configuration=ccm-service-annotations",
        ]))
        .unwrap()
        .unwrap()
    }

    #[test]
    fn only_the_cert_secret_flag_makes_certificates_self_managed() {
        let cert_manager = args(&[
            "--webhooks=service-annotations",
            "--webhook-tls-cert-file=/etc/webhook-certs/tls.crt",
            "--webhook-tls-private-key-file=/etc/webhook-certs/tls.key",
        ]);
        assert_eq!(SelfManaged::from_args(&cert_manager).unwrap(), None);
        assert_eq!(SelfManaged::from_args(&[]).unwrap(), None);
        assert!(SelfManaged::from_args(&args(&["--webhook-cert-secret=no-namespace"])).is_err());
    }

    #[test]
    fn the_rules_name_the_one_secret_in_its_namespace_and_the_one_configuration() {
        let rules = self_managed().rules();
        assert_eq!(rules[0].namespace.as_deref(), Some("kube-system"));
        assert_eq!(rules[0].resource_names, ["ccm-webhook-cert"]);
        assert_eq!(rules[0].verbs, ["get", "update"]);
        assert_eq!(rules[1].namespace, None);
        assert_eq!(rules[1].resource_names, ["ccm-service-annotations"]);
        assert_eq!(rules[1].verbs, ["get", "update"]);
    }

    #[test]
    fn certificates_are_in_place_only_with_every_key_and_the_same_ca_everywhere() {
        let secret =
            json!({ "data": { "ca.crt": "Q0E=", "tls.crt": "Q0VSVA==", "tls.key": "S0VZ" } });
        let configuration = |ca: Value| json!({ "webhooks": [{ "name": "w", "clientConfig": { "caBundle": ca } }] });
        assert!(certificates_in_place(&secret, &configuration(json!("Q0E="))).is_ok());
        assert!(certificates_in_place(&secret, &configuration(Value::Null)).is_err());
        assert!(certificates_in_place(&secret, &configuration(json!("b3RoZXI="))).is_err());
        let empty = json!({ "metadata": { "name": "ccm-webhook-cert" } });
        let error = certificates_in_place(&empty, &configuration(Value::Null)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the Secret lacks ca.crt, tls.crt, tls.key"
        );
    }

    #[test]
    fn the_created_objects_are_the_rendered_ones_the_arguments_name() {
        let docs = [
            json!({ "kind": "Secret", "metadata": { "name": "ccm-cloud-config" } }),
            json!({ "kind": "Secret", "metadata": { "name": "ccm-webhook-cert" } }),
            json!({ "kind": "ValidatingWebhookConfiguration", "metadata": { "name": "ccm-service-annotations" } }),
        ];
        let rendered = args(&[
            "--webhook-cert-secret=kube-system/ccm-webhook-cert",
            "--webhook-configuration=ccm-service-annotations",
        ]);
        let certificates = Certificates::from_render(&docs, &rendered)
            .unwrap()
            .unwrap();
        assert_eq!(
            certificates.objects,
            [
                (
                    "/api/v1/namespaces/kube-system/secrets".to_owned(),
                    docs[1].clone()
                ),
                (CONFIGURATIONS.to_owned(), docs[2].clone()),
            ]
        );
        assert!(Certificates::from_render(&docs[..2], &rendered).is_err());
        assert!(Certificates::from_render(&docs, &[]).unwrap().is_none());
    }
}
