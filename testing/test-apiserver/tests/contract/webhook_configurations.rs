//! Contract: ValidatingWebhookConfigurations (`admissionregistration.k8s.io/v1`)
//! as kube-apiserver serves them: the v1 defaults, generation, replace with
//! a resourceVersion (and only with one), validation in its words,
//! `resourceNames` in RBAC, discovery and the printed table; and kubectl's
//! view of them. The webhooks made here match a group nothing serves and
//! ignore failures, so a real cluster never calls them.

use crate::support;

use std::time::Duration;

use anyhow::Context;
use http::Method;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::process::{Binary, kubectl};
use support::raw;
use support::table::{check, table};

const GROUP: &str = "admissionregistration.k8s.io";
const COLLECTION: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

fn object<T: DeserializeOwned>(value: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// A webhook named `name` that no request ever matches.
fn webhook(name: &str) -> Value {
    json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "clientConfig": {"service": {"namespace": "default", "name": "contract-absent", "path": "/validate"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": ["contract.example.com"],
                   "apiVersions": ["v1"], "resources": ["widgets"]}],
    })
}

fn configuration(name: &str, webhooks: &[&str]) -> Value {
    let webhooks: Vec<Value> = webhooks.iter().map(|w| webhook(w)).collect();
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ValidatingWebhookConfiguration",
           "metadata": {"name": name}, "webhooks": webhooks})
}

fn api(client: kube::Client) -> Api<ValidatingWebhookConfiguration> {
    Api::all(client)
}

contract_test!(
    a_configuration_is_defaulted_read_listed_replaced_and_deleted,
    |t| {
        let configurations = api(t.client());
        let name = ccm_test_support::unique("vwc");
        let created = configurations
            .create(
                &PostParams::default(),
                &object(configuration(&name, &["check.contract.example.com"]))?,
            )
            .await?;
        assert_eq!(created.metadata.generation, Some(1));
        let hook = serde_json::to_value(&created.webhooks.as_deref().context("webhooks")?[0])?;
        assert_eq!(hook["failurePolicy"], "Ignore", "a given value is kept");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(hook["namespaceSelector"], json!({}));
        assert_eq!(hook["objectSelector"], json!({}));
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);

        let read = configurations.get(&name).await?;
        assert_eq!(read, created);
        let listed = configurations.list(&ListParams::default()).await?;
        assert!(
            listed
                .items
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(name.as_str()))
        );

        // What the CCM does: read, set every caBundle, replace.
        let bundle =
            ByteString(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_vec());
        let mut changed = read.clone();
        for hook in changed.webhooks.iter_mut().flatten() {
            hook.client_config.ca_bundle = Some(bundle.clone());
        }
        let replaced = configurations
            .replace(&name, &PostParams::default(), &changed)
            .await?;
        assert_ne!(
            replaced.metadata.resource_version,
            read.metadata.resource_version
        );
        assert_eq!(
            replaced.metadata.generation,
            Some(2),
            "a change of the webhooks counts"
        );
        let stored = configurations.get(&name).await?;
        assert_eq!(
            stored.webhooks.as_deref().context("webhooks")?[0]
                .client_config
                .ca_bundle,
            Some(bundle)
        );

        let stale = configurations
            .replace(&name, &PostParams::default(), &changed)
            .await
            .expect_err("the resourceVersion read first is stale now");
        assert!(
            matches!(&stale, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict"),
            "{stale:?}"
        );

        let mut unconditional = serde_json::to_value(&stored)?;
        unconditional["metadata"]
            .as_object_mut()
            .context("metadata")?
            .remove("resourceVersion");
        let (code, refused) = raw(
            &t.client(),
            Method::PUT,
            &format!("{COLLECTION}/{name}"),
            Some(&unconditional),
        )
        .await?;
        assert_eq!(code, 422, "{refused}");
        assert_eq!(
            refused["message"],
            format!(
                "validatingwebhookconfigurations.{GROUP} \"{name}\" is invalid: metadata.resourceVersion: \
                 Invalid value: 0: must be specified for an update"
            )
        );

        configurations
            .delete(&name, &DeleteParams::default())
            .await?;
        let gone = configurations.get(&name).await.expect_err("deleted");
        assert!(
            matches!(&gone, kube::Error::Api(s) if s.code == 404),
            "{gone:?}"
        );
        Ok(())
    }
);

/// POSTs `body` and answers the 422's message and its causes as
/// `(field, message)`.
async fn refusal(
    t: &support::Target,
    body: &Value,
) -> anyhow::Result<(String, Vec<(String, String)>)> {
    let (code, status) = raw(&t.client(), Method::POST, COLLECTION, Some(body)).await?;
    anyhow::ensure!(code == 422, "{code}: {status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "ValidatingWebhookConfiguration");
    assert_eq!(status["details"]["group"], GROUP);
    let causes = status["details"]["causes"]
        .as_array()
        .context("causes")?
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    Ok((
        status["message"].as_str().unwrap_or_default().to_owned(),
        causes,
    ))
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(f, m)| ((*f).to_owned(), (*m).to_owned()))
        .collect()
}

contract_test!(invalid_webhooks_are_refused_in_kube_apiservers_words, |t| {
    let name = ccm_test_support::unique("vwc-invalid");
    let mut body = configuration(&name, &[]);
    body["webhooks"] = json!([
        {"name": "example.com", "clientConfig": {}, "sideEffects": "Some",
         "admissionReviewVersions": ["v1"], "timeoutSeconds": 31, "failurePolicy": "Never"},
        {"name": "b.contract.example.com", "clientConfig": {"url": "http://hooks.example"},
         "sideEffects": "None", "admissionReviewVersions": []},
        webhook("b.contract.example.com"),
    ]);
    let (message, causes) = refusal(t, &body).await?;
    let expected = pairs(&[
        (
            "webhooks[0].name",
            "Invalid value: \"example.com\": should be a domain with at least three segments separated by dots",
        ),
        (
            "webhooks[0].failurePolicy",
            "Unsupported value: \"Never\": supported values: \"Fail\", \"Ignore\"",
        ),
        (
            "webhooks[0].sideEffects",
            "Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
        ),
        (
            "webhooks[0].timeoutSeconds",
            "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        (
            "webhooks[0].clientConfig",
            "Required value: exactly one of url or service is required",
        ),
        (
            "webhooks[1].clientConfig.url",
            "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        ),
        (
            "webhooks[1].admissionReviewVersions",
            "Required value: must specify one of v1, v1beta1",
        ),
        (
            "webhooks[2].name",
            "Duplicate value: \"b.contract.example.com\"",
        ),
    ]);
    assert_eq!(causes, expected);
    let listed: Vec<String> = expected.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    assert_eq!(
        message,
        format!(
            "ValidatingWebhookConfiguration.{GROUP} \"{name}\" is invalid: [{}]",
            listed.join(", ")
        )
    );

    let mut body = configuration(&name, &["c.contract.example.com"]);
    let hook = &mut body["webhooks"][0];
    hook["admissionReviewVersions"] = json!(["v1", "v1"]);
    hook["clientConfig"] = json!({"service": {"namespace": "default"}});
    hook["rules"][0]
        .as_object_mut()
        .context("rule")?
        .remove("resources");
    hook["matchConditions"] = json!([{"name": "lb", "expression": " "}]);
    let (_, causes) = refusal(t, &body).await?;
    assert_eq!(
        causes,
        pairs(&[
            ("webhooks[0].rules[0].resources", "Required value"),
            // kube-apiserver's own mix-up: the missing *name* is reported
            // at `namespace`.
            (
                "webhooks[0].clientConfig.service.namespace",
                "Required value"
            ),
            (
                "webhooks[0].matchConditions[0].expression",
                "Required value"
            ),
            (
                "webhooks[0].admissionReviewVersions[1]",
                "Invalid value: \"v1\": duplicate version"
            ),
        ])
    );
    Ok(())
});

/// A new namespace, a ServiceAccount in it and a client with its token.
async fn account(t: &support::Target, name: &str) -> anyhow::Result<(String, kube::Client)> {
    let ns = ccm_test_support::unique("vwc-rbac");
    Api::<Namespace>::all(t.client())
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client(), &ns);
    accounts
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &TokenRequest::default())
        .await?;
    let token = issued.status.context("a TokenRequest status")?.token;
    Ok((ns, t.client_as(Some(&token))?))
}

auth_contract_test!(
    a_role_naming_one_configuration_reads_and_replaces_only_that_one,
    |t| {
        let (ns, client) = account(t, "ccm").await?;
        let mine = ccm_test_support::unique("vwc-mine");
        let other = ccm_test_support::unique("vwc-other");
        let admin = api(t.client());
        for name in [&mine, &other] {
            admin
                .create(
                    &PostParams::default(),
                    &object(configuration(name, &["check.contract.example.com"]))?,
                )
                .await?;
        }
        let role = ccm_test_support::unique("vwc-ca-bundle");
        Api::<ClusterRole>::all(t.client())
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": role}, "rules": [
                    {"apiGroups": [GROUP], "resources": ["validatingwebhookconfigurations"],
                     "resourceNames": [mine], "verbs": ["get", "update"]}
                ]}))?,
            )
            .await?;
        Api::<ClusterRoleBinding>::all(t.client())
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": role},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": ns}]}))?,
            )
            .await?;

        let as_ccm = api(client.clone());
        // kube-apiserver's authorizer sees new RBAC objects a moment later.
        let mut read = ccm_test_support::eventually(
            "the granted configuration to be readable",
            Duration::from_secs(30),
            || async { as_ccm.get(&mine).await.ok() },
        )
        .await?;
        for hook in read.webhooks.iter_mut().flatten() {
            hook.client_config.ca_bundle = Some(ByteString(b"ca".to_vec()));
        }
        as_ccm.replace(&mine, &PostParams::default(), &read).await?;

        let other_path = format!("{COLLECTION}/{other}");
        let (code, refused) = raw(&client, Method::GET, &other_path, None).await?;
        assert_eq!(code, 403, "{refused}");
        assert_eq!(
            refused["message"],
            format!(
                "validatingwebhookconfigurations.{GROUP} \"{other}\" is forbidden: User \
                 \"system:serviceaccount:{ns}:ccm\" cannot get resource \
                 \"validatingwebhookconfigurations\" in API group \"{GROUP}\" at the cluster scope"
            )
        );
        let theirs = serde_json::to_value(admin.get(&other).await?)?;
        let (code, _) = raw(&client, Method::PUT, &other_path, Some(&theirs)).await?;
        assert_eq!(code, 403);
        let (code, _) = raw(&client, Method::GET, COLLECTION, None).await?;
        assert_eq!(code, 403, "resourceNames never grant a list");

        Api::<ClusterRoleBinding>::all(t.client())
            .delete(&role, &DeleteParams::default())
            .await?;
        Api::<ClusterRole>::all(t.client())
            .delete(&role, &DeleteParams::default())
            .await?;
        for name in [&mine, &other] {
            admin.delete(name, &DeleteParams::default()).await?;
        }
        Api::<Namespace>::all(t.client())
            .delete(&ns, &DeleteParams::default())
            .await?;
        Ok(())
    }
);

contract_test!(
    discovery_lists_the_group_in_kube_apiservers_order_and_the_resource,
    |t| {
        let client = t.client();
        let (_, groups) = raw(&client, Method::GET, "/apis", None).await?;
        // The groups this server serves, in the order kube-apiserver lists them.
        let served = [
            "events.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "certificates.k8s.io",
            "rbac.authorization.k8s.io",
            GROUP,
            "coordination.k8s.io",
            "discovery.k8s.io",
        ];
        let listed: Vec<&str> = groups["groups"]
            .as_array()
            .context("groups")?
            .iter()
            .filter_map(|g| g["name"].as_str())
            .filter(|g| served.contains(g))
            .collect();
        assert_eq!(listed, served);

        let (_, group) = raw(&client, Method::GET, &format!("/apis/{GROUP}"), None).await?;
        assert_eq!(
            group["preferredVersion"]["groupVersion"],
            format!("{GROUP}/v1")
        );
        let (_, resources) = raw(&client, Method::GET, &format!("/apis/{GROUP}/v1"), None).await?;
        let entry = resources["resources"]
            .as_array()
            .context("resources")?
            .iter()
            .find(|r| r["name"] == "validatingwebhookconfigurations")
            .context("validatingwebhookconfigurations")?;
        assert_eq!(entry["singularName"], "validatingwebhookconfiguration");
        assert_eq!(entry["namespaced"], false);
        assert_eq!(entry["kind"], "ValidatingWebhookConfiguration");
        assert_eq!(entry.get("shortNames"), None);
        let mut verbs: Vec<&str> = entry["verbs"]
            .as_array()
            .context("verbs")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        verbs.sort_unstable();
        assert_eq!(
            verbs,
            [
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ]
        );
        Ok(())
    }
);

contract_test!(a_configuration_prints_its_name_and_webhook_count, |t| {
    let client = t.client();
    let name = ccm_test_support::unique("vwc-table");
    support::table::create(
        &client,
        COLLECTION,
        configuration(&name, &["a.contract.example.com", "b.contract.example.com"]),
    )
    .await?;
    let printed = table(&client, &format!("{COLLECTION}/{name}")).await;
    raw(
        &client,
        Method::DELETE,
        &format!("{COLLECTION}/{name}"),
        None,
    )
    .await?;
    check(
        &printed?,
        &[
            ("Name", "string", 0),
            ("Webhooks", "integer", 0),
            ("Age", "string", 0),
        ],
        &[json!(name), json!(2), json!("")],
    )
});

const CHART_LIKE: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: ccm-service-annotations
webhooks:
  - name: service-annotations.ccm.example.com
    admissionReviewVersions: [\"v1\"]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 5
    clientConfig:
      service:
        namespace: kube-system
        name: ccm-webhook
        path: /validate-service
        port: 443
    rules:
      - apiGroups: [\"\"]
        apiVersions: [\"v1\"]
        operations: [\"CREATE\", \"UPDATE\"]
        resources: [\"services\"]
        scope: Namespaced
    matchConditions:
      - name: load-balancer-services
        expression: \"object.spec.type == 'LoadBalancer'\"
";

#[tokio::test]
async fn kubectl_applies_gets_and_describes_a_configuration() -> anyhow::Result<()> {
    ccm_test_support::kubectl_path()?;
    let server = Binary::start(&[]).await?;
    let manifest = server.dir().join("webhook.yaml");
    std::fs::write(&manifest, CHART_LIKE)?;
    let manifest = manifest.to_str().context("utf-8 path")?;
    let applied = kubectl(&server, &["apply", "-f", manifest]).await?;
    assert_eq!(
        applied.trim(),
        "validatingwebhookconfiguration.admissionregistration.k8s.io/ccm-service-annotations created"
    );
    let again = kubectl(&server, &["apply", "-f", manifest]).await?;
    assert!(again.trim().ends_with("unchanged"), "{again}");
    // kubectl sends only the changed field of the webhook: the server
    // merges `webhooks` by name, as kube-apiserver does.
    std::fs::write(
        manifest,
        CHART_LIKE.replace("timeoutSeconds: 5", "timeoutSeconds: 7"),
    )?;
    let changed = kubectl(&server, &["apply", "-f", manifest]).await?;
    assert!(changed.trim().ends_with("configured"), "{changed}");
    let merged = kubectl(
        &server,
        &[
            "get",
            "validatingwebhookconfiguration",
            "ccm-service-annotations",
            "-o",
            "jsonpath={.webhooks[0].timeoutSeconds} {.webhooks[0].clientConfig.service.path}",
        ],
    )
    .await?;
    assert_eq!(merged, "7 /validate-service");

    let printed = kubectl(&server, &["get", "validatingwebhookconfigurations"]).await?;
    let rows: Vec<Vec<&str>> = printed
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "WEBHOOKS", "AGE"]);
    assert_eq!(rows[1][..2], ["ccm-service-annotations", "1"]);

    // Typed clients: protobuf answers.
    let described = kubectl(
        &server,
        &[
            "describe",
            "validatingwebhookconfiguration",
            "ccm-service-annotations",
        ],
    )
    .await?;
    assert!(described.contains("/validate-service"), "{described}");
    assert!(described.contains("load-balancer-services"), "{described}");
    Ok(())
}
