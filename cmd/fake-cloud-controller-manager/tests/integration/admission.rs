//! The admission webhook against a real kube-apiserver: kube-apiserver
//! calls the CCM's `service-annotations` webhook, `kubectl apply` of a
//! value the cloud's upstream CCM fails on is refused with the CCM's
//! message, `--dry-run=server` shows the same; a misspelled key, keys of
//! another controller and a deprecated key are applied with kubectl's
//! `Warning:` lines (and the misspelling gets its Warning event); with
//! `--webhook-strict` the misspelling is refused; and with the CCM stopped
//! Services are admitted within the timeout.
//!
//! The test API server does not call admission webhooks, so this suite
//! needs a real cluster (`cargo xtask ci` runs it against the kube-apiserver
//! it builds). The CCM keeps its own certificates (`--webhook-cert-secret`)
//! and the configuration's `caBundle`, as the chart runs it.

use std::path::Path;
use std::time::{Duration, Instant};

use ccm_test_support::{Ccm, Credentials, Launch, eventually, free_port, kubectl_command, unique};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Event, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "default";
const TYPE: &str = "service.beta.kubernetes.io/fake-load-balancer-type";
const TYPO: &str = "service.beta.kubernetes.io/fake-load-balancer-typ";
const DEPRECATED: &str = "service.beta.kubernetes.io/fake-load-balancer-health-check-interval";
const INTERVAL: &str = "service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval";
/// The fake's stand-ins for keys another controller reads under the same
/// prefix (as the AWS Load Balancer Controller's `aws-load-balancer-*`
/// keys on an AWS Service): upstream ignores them.
const OTHER_CONTROLLERS_KEYS: &[(&str, &str)] = &[
    (
        "service.beta.kubernetes.io/fake-load-balancer-nlb-target-type",
        "ip",
    ),
    (
        "service.beta.kubernetes.io/fake-load-balancer-scheme",
        "internet-facing",
    ),
    (
        "service.beta.kubernetes.io/fake-load-balancer-healthcheck-success-codes",
        "200-399",
    ),
];
/// What the webhook adds to an unknown key's message when it admits it.
const IGNORED: &str =
    "(ignored here, as upstream's cloud-controller-manager ignores keys it does not read)";

/// What `kubectl` said and whether it succeeded.
struct Outcome {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn kubectl_apply(kubeconfig: &Path, manifest: &str, extra: &[&str]) -> Outcome {
    let dir = kubeconfig.parent().unwrap();
    let file = dir.join(format!("{}.json", unique("manifest")));
    std::fs::write(&file, manifest).unwrap();
    let mut command = kubectl_command(kubeconfig).unwrap();
    command.args(["apply", "-f"]).arg(&file).args(extra);
    let out = tokio::time::timeout(WAIT, command.output())
        .await
        .expect("kubectl within a minute")
        .expect("kubectl runs");
    Outcome {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn manifest(name: &str, annotations: &[(&str, &str)]) -> String {
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
    })
    .to_string()
}

/// The webhook configuration as the chart renders it, but calling the CCM
/// by URL on loopback (a bare kube-apiserver has no Service network).
fn configuration(name: &str, port: u16) -> ValidatingWebhookConfiguration {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "service-annotations.ccm.rust-ccm.io",
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate-service")},
            "rules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["services"],
                "scope": "Namespaced",
            }],
            "matchConditions": [{
                "name": "load-balancer-services",
                "expression": "object.spec.type == 'LoadBalancer'",
            }],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": 2,
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap()
}

struct Setup {
    kubeconfig: std::path::PathBuf,
    cluster: String,
    port: u16,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn start_ccm(&self) -> Ccm {
        self.start_ccm_with(&[]).await
    }

    async fn start_ccm_with(&self, extra: &[&str]) -> Ccm {
        let cloud_config = self.dir.path().join("cloud.toml");
        std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
        let cluster = &self.cluster;
        Launch::new(
            BINARY,
            self.dir.path().join(format!("{}.log", unique("ccm"))),
        )
        .credentials(&Credentials {
            kubeconfig: self.kubeconfig.clone(),
            rbac_limited: false,
        })
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            format!("--cluster-name={cluster}"),
            format!("--leader-elect-resource-name={cluster}"),
            "--configure-cloud-routes=false".to_owned(),
            "--controllers=service-lb-controller".to_owned(),
            "--webhooks=service-annotations".to_owned(),
            "--webhook-bind-address=127.0.0.1".to_owned(),
            format!("--webhook-secure-port={}", self.port),
            format!("--webhook-cert-secret={NAMESPACE}/{cluster}-certs"),
            format!("--webhook-service={NAMESPACE}/{cluster}-webhook"),
            format!("--webhook-configuration={cluster}"),
        ])
        .args(extra.iter().map(|a| (*a).to_owned()))
        .start()
        .await
        .expect("the CCM starts and is ready")
    }
}

/// The Warning events about Service `name`, as `(reason, message)`.
async fn warnings(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    events
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

#[tokio::test]
#[ignore = "needs a real cluster: set KUBECONFIG"]
#[allow(clippy::print_stdout, reason = "the figure the suite reports")]
async fn kubectl_apply_is_refused_or_warned_with_the_ccms_words() {
    let kubeconfig = std::path::PathBuf::from(
        std::env::var_os("KUBECONFIG").expect("set KUBECONFIG to a real cluster"),
    );
    let client = kube::Client::try_default()
        .await
        .expect("a client for KUBECONFIG");
    let dir = tempfile::tempdir().unwrap();
    let local_kubeconfig = dir.path().join("kubeconfig");
    std::fs::copy(&kubeconfig, &local_kubeconfig).unwrap();
    let setup = Setup {
        kubeconfig: local_kubeconfig,
        cluster: unique("admission"),
        port: free_port().unwrap(),
        dir,
    };
    let cluster = setup.cluster.clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let mut empty = Secret::default();
    empty.metadata.name = Some(format!("{cluster}-certs"));
    secrets
        .create(&PostParams::default(), &empty)
        .await
        .unwrap();
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    configurations
        .create(&PostParams::default(), &configuration(&cluster, setup.port))
        .await
        .unwrap();

    let ccm = setup.start_ccm().await;
    eventually("the CCM to fill the caBundle", WAIT, || async {
        let stored = configurations.get(&cluster).await.ok()?;
        stored.webhooks?[0]
            .client_config
            .ca_bundle
            .as_ref()
            .map(drop)
    })
    .await
    .unwrap();

    // The API server picks the configuration up within a moment; until then
    // `failurePolicy: Ignore` admits, so the first refusal is awaited.
    let malformed = format!("{cluster}-malformed");
    let refused = eventually("kubectl apply to be refused", WAIT, || async {
        let out = kubectl_apply(
            &setup.kubeconfig,
            &manifest(&malformed, &[(INTERVAL, "1")]),
            &["--dry-run=server"],
        )
        .await;
        (!out.ok).then_some(out.stderr)
    })
    .await
    .unwrap();
    let expected = format!("annotation {INTERVAL}: expected a whole number from 5 to 300, got `1`");
    assert!(
        refused.contains(&format!("denied the request: {expected}")),
        "{refused}"
    );
    let out = kubectl_apply(
        &setup.kubeconfig,
        &manifest(&malformed, &[(INTERVAL, "1")]),
        &[],
    )
    .await;
    assert!(!out.ok, "{}", out.stdout);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    assert!(
        services.get_opt(&malformed).await.unwrap().is_none(),
        "nothing was stored"
    );

    // Upstream ignores keys it does not know: applied, with a Warning line
    // each, and the misspelling gets the service controller's event in the
    // same words.
    let typo = format!("{cluster}-typo");
    let out = kubectl_apply(&setup.kubeconfig, &manifest(&typo, &[(TYPO, "nlb")]), &[]).await;
    assert!(out.ok, "{}", out.stderr);
    let unknown = format!("unknown annotation {TYPO}; did you mean {TYPE}?");
    assert!(
        out.stderr
            .contains(&format!("Warning: {unknown} {IGNORED}")),
        "{}",
        out.stderr
    );
    let published = eventually("the UnknownAnnotation warning", WAIT, || async {
        warnings(&client, &typo)
            .await
            .into_iter()
            .find(|(reason, _)| reason == "UnknownAnnotation")
    })
    .await
    .unwrap();
    assert_eq!(
        published.1, unknown,
        "the event and the warning say the same"
    );

    let others = format!("{cluster}-others");
    let out = kubectl_apply(
        &setup.kubeconfig,
        &manifest(&others, OTHER_CONTROLLERS_KEYS),
        &[],
    )
    .await;
    assert!(out.ok, "{}", out.stderr);
    for (key, _) in OTHER_CONTROLLERS_KEYS {
        assert!(
            out.stderr
                .contains(&format!("Warning: unknown annotation {key}")),
            "{key}: {}",
            out.stderr
        );
    }

    let good = format!("{cluster}-good");
    let out = kubectl_apply(&setup.kubeconfig, &manifest(&good, &[(TYPE, "nlb")]), &[]).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(!out.stderr.contains("Warning:"), "{}", out.stderr);

    let old = format!("{cluster}-old");
    let out = kubectl_apply(
        &setup.kubeconfig,
        &manifest(&old, &[(DEPRECATED, "30")]),
        &[],
    )
    .await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "Warning: annotation {DEPRECATED} is deprecated: use service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval instead"
        )),
        "{}",
        out.stderr
    );

    // Strict: the misspelling is refused, with the same words.
    ccm.terminate().await.unwrap();
    let ccm = setup.start_ccm_with(&["--webhook-strict"]).await;
    let strict = format!("{cluster}-strict");
    let refused = eventually("the strict CCM to refuse", WAIT, || async {
        let out = kubectl_apply(
            &setup.kubeconfig,
            &manifest(&strict, &[(TYPO, "nlb")]),
            &["--dry-run=server"],
        )
        .await;
        (!out.ok).then_some(out.stderr)
    })
    .await
    .unwrap();
    assert!(
        refused.contains(&format!("denied the request: {unknown}")),
        "{refused}"
    );

    // The CCM down: Services are admitted at once (connection refused,
    // failurePolicy Ignore), and a bad one bypasses admission.
    ccm.terminate().await.unwrap();
    let bypass = format!("{cluster}-bypass");
    let started = Instant::now();
    let out = kubectl_apply(
        &setup.kubeconfig,
        &manifest(&bypass, &[(INTERVAL, "1")]),
        &[],
    )
    .await;
    let took = started.elapsed();
    assert!(out.ok, "{}", out.stderr);
    assert!(took < Duration::from_secs(3), "admitted in {took:?}");
    println!("with the CCM stopped, kubectl apply was admitted in {took:?}");

    // Back up, the service controller warns about the Service that
    // bypassed admission in the admission's very words.
    let ccm = setup.start_ccm().await;
    let published = eventually("the InvalidAnnotation warning", WAIT, || async {
        warnings(&client, &bypass)
            .await
            .into_iter()
            .find(|(reason, _)| reason == "InvalidAnnotation")
    })
    .await
    .unwrap();
    assert_eq!(
        published.1, expected,
        "the event and the denial say the same"
    );

    // Deleted while the CCM runs, so their finalizers are released.
    let stored = [&typo, &others, &good, &old, &bypass];
    for name in stored {
        services
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("the Services to be gone", WAIT, || async {
        for name in stored {
            if services.get_opt(name).await.ok()?.is_some() {
                return None;
            }
        }
        Some(())
    })
    .await
    .unwrap();
    ccm.terminate().await.unwrap();
    configurations
        .delete(&cluster, &DeleteParams::default())
        .await
        .unwrap();
    secrets
        .delete(&format!("{cluster}-certs"), &DeleteParams::default())
        .await
        .unwrap();
}
