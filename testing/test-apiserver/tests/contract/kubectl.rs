//! The real `kubectl` against the `test-apiserver` binary, through the
//! kubeconfig the binary writes: tables, watches, patches, server-side
//! field validation found through the OpenAPI v3 documents, `explain`.

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use support::process::{Binary, kubectl, kubectl_command};
use tokio::io::{AsyncBufReadExt, BufReader};

const CONFIG_MAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  labels:
    app: demo
data:
  a: \"1\"
";

#[tokio::test]
async fn kubectl_gets_describes_creates_patches_watches_and_deletes() -> anyhow::Result<()> {
    ccm_test_support::kubectl_path()?;
    let server = Binary::start(&["--nodes", "2", "--services", "1"]).await?;

    let nodes = kubectl(&server, &["get", "nodes", "-o", "name"]).await?;
    assert_eq!(
        nodes.lines().collect::<Vec<_>>(),
        ["node/node-1", "node/node-2"]
    );
    let taint = kubectl(
        &server,
        &[
            "get",
            "node",
            "node-1",
            "-o",
            "jsonpath={.spec.taints[0].key}",
        ],
    )
    .await?;
    assert_eq!(taint, ccm_test_apiserver::UNINITIALIZED_TAINT);
    let described = kubectl(&server, &["describe", "node", "node-1"]).await?;
    let taint = format!(
        "{}=true:NoSchedule",
        ccm_test_apiserver::UNINITIALIZED_TAINT
    );
    assert!(described.contains(&taint), "{described}");
    let lb = kubectl(
        &server,
        &[
            "get",
            "service",
            "lb-1",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.type}",
        ],
    )
    .await?;
    assert_eq!(lb, "LoadBalancer");

    let manifest = server.dir().join("configmap.yaml");
    std::fs::write(&manifest, CONFIG_MAP)?;
    let manifest = manifest.to_str().context("utf-8 path")?;
    let created = kubectl(&server, &["create", "--validate=false", "-f", manifest]).await?;
    assert_eq!(created.trim(), "configmap/demo created");

    let mut watch = kubectl_command(&server)?
        .args([
            "get",
            "configmaps",
            "--watch",
            "-o",
            "name",
            "-l",
            "app=demo",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(watch.stdout.take().context("stdout")?).lines();
    let mut watched = Vec::new();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("no listing from kubectl get -w")??;
    watched.extend(first);

    kubectl(
        &server,
        &[
            "patch",
            "configmap",
            "demo",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"b":"2"}}"#,
        ],
    )
    .await?;
    kubectl(
        &server,
        &[
            "patch",
            "configmap",
            "demo",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/data/a","value":"3"}]"#,
        ],
    )
    .await?;
    kubectl(
        &server,
        &[
            "patch",
            "configmap",
            "demo",
            "--type",
            "strategic",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/x"]}}"#,
        ],
    )
    .await?;
    let patched = kubectl(
        &server,
        &[
            "get",
            "configmap",
            "demo",
            "-o",
            "jsonpath={.data.a},{.data.b},{.metadata.finalizers[0]}",
        ],
    )
    .await?;
    assert_eq!(patched, "3,2,example.com/x");

    kubectl(&server, &["delete", "configmap", "demo", "--wait=false"]).await?;
    let held = kubectl(
        &server,
        &[
            "get",
            "configmap",
            "demo",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    )
    .await?;
    assert!(!held.is_empty(), "the finalizer holds the object");
    kubectl(
        &server,
        &[
            "patch",
            "configmap",
            "demo",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    )
    .await?;
    kubectl(
        &server,
        &["delete", "configmap", "demo", "--ignore-not-found"],
    )
    .await?;
    let left = kubectl(
        &server,
        &["get", "configmaps", "-l", "app=demo", "-o", "name"],
    )
    .await?;
    assert_eq!(left.trim(), "");

    // Listing, three patches, the deletion mark, the finalizer removal that deleted it.
    while watched.len() < 6 {
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(line))) => watched.push(line),
            other => bail!("kubectl get -w stopped early after {watched:?}: {other:?}"),
        }
    }
    watch.kill().await?;
    assert!(watched.iter().all(|l| l == "configmap/demo"), "{watched:?}");
    Ok(())
}

/// kubectl's lines for `args`, each split into its columns.
async fn rows(server: &Binary, args: &[&str]) -> anyhow::Result<Vec<Vec<String>>> {
    let out = kubectl(server, args).await?;
    Ok(out
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect())
}

#[tokio::test]
async fn kubectl_prints_the_servers_tables_and_get_w_streams_the_external_ip_appearing()
-> anyhow::Result<()> {
    ccm_test_support::kubectl_path()?;
    let server = Binary::start(&["--nodes", "1", "--services", "1"]).await?;

    let nodes = rows(&server, &["get", "nodes", "-o", "wide"]).await?;
    assert_eq!(
        nodes[0],
        [
            "NAME",
            "STATUS",
            "ROLES",
            "AGE",
            "VERSION",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME"
        ]
    );
    assert_eq!(nodes[1][..3], ["node-1", "Ready", "<none>"], "{nodes:?}");
    assert_eq!(nodes[1][4], "v1.33.0", "{nodes:?}");

    let services = rows(&server, &["get", "services", "-n", "default"]).await?;
    assert_eq!(
        services[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    let lb = services
        .iter()
        .find(|r| r[0] == "lb-1")
        .context("lb-1 listed")?;
    assert_eq!(lb[1], "LoadBalancer");
    assert_eq!(lb[3], "<pending>");

    // The sandbox's demo: watch the Service until its load balancer shows.
    let mut watch = kubectl_command(&server)?
        .args(["get", "service", "lb-1", "-n", "default", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut lines = BufReader::new(watch.stdout.take().context("stdout")?).lines();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(line))) => seen.push(line),
            other => bail!("kubectl get -w stopped early after {seen:?}: {other:?}"),
        }
    }
    assert!(seen[0].starts_with("NAME"), "{seen:?}");
    assert!(seen[1].contains("<pending>"), "{seen:?}");
    kubectl(
        &server,
        &[
            "patch",
            "service",
            "lb-1",
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.9"}]}}}"#,
        ],
    )
    .await?;
    let appeared = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("no row after the status change")??
        .context("kubectl get -w ended")?;
    watch.kill().await?;
    assert!(appeared.contains("203.0.113.9"), "{appeared}");
    assert!(
        !appeared.starts_with("NAME"),
        "headers only once: {appeared}"
    );
    Ok(())
}

#[tokio::test]
async fn kubectl_apply_server_side_is_refused_with_one_clear_line() -> anyhow::Result<()> {
    ccm_test_support::kubectl_path()?;
    let server = Binary::start(&[]).await?;
    let manifest = server.dir().join("ssa.yaml");
    std::fs::write(&manifest, CONFIG_MAP)?;
    let output = kubectl_command(&server)?
        .args([
            "apply",
            "--server-side",
            "--validate=false",
            "-f",
            manifest.to_str().context("utf-8 path")?,
        ])
        .output()
        .await?;
    assert!(!output.status.success(), "server-side apply must not pass");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("server-side apply (application/apply-patch+yaml) is not implemented"),
        "{stderr}"
    );
    Ok(())
}

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80, targetPort: 8080}]}
";

const UNKNOWN_FIELD: &str = "apiVersion: v1
kind: Service
metadata: {name: web2, namespace: default}
spec: {type: LoadBalancer, portz: [{port: 80}], ports: [{port: 80}]}
";

#[tokio::test]
async fn kubectl_apply_validates_on_the_server_and_explain_reads_the_openapi_documents()
-> anyhow::Result<()> {
    ccm_test_support::kubectl_path()?;
    let server = Binary::start(&[]).await?;
    let good = server.dir().join("service.yaml");
    std::fs::write(&good, SERVICE)?;
    let good = good.to_str().context("utf-8 path")?;
    // kubectl's default --validate=strict: it finds fieldValidation in the
    // OpenAPI v3 documents and lets the server validate.
    let created = kubectl(&server, &["apply", "-f", good]).await?;
    assert_eq!(created.trim(), "service/web created");
    let again = kubectl(&server, &["apply", "-f", good]).await?;
    assert_eq!(again.trim(), "service/web unchanged");

    let bad = server.dir().join("unknown-field.yaml");
    std::fs::write(&bad, UNKNOWN_FIELD)?;
    let output = kubectl_command(&server)?
        .args(["apply", "-f", bad.to_str().context("utf-8 path")?])
        .output()
        .await?;
    assert!(!output.status.success(), "an unknown field is refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("strict decoding error: unknown field \"spec.portz\""),
        "{stderr}"
    );

    let explained = kubectl(&server, &["explain", "service.spec.type"]).await?;
    assert!(explained.contains("FIELD: type <string>"), "{explained}");
    assert!(
        explained.contains("type determines how the Service is exposed"),
        "{explained}"
    );
    let lease = kubectl(&server, &["explain", "leases.spec"]).await?;
    assert!(lease.contains("GROUP:      coordination.k8s.io"), "{lease}");
    assert!(lease.contains("holderIdentity"), "{lease}");
    Ok(())
}

#[tokio::test]
async fn kubectl_create_and_describe_speak_protobuf_and_explain_reads_openapi_v2()
-> anyhow::Result<()> {
    ccm_test_support::kubectl_path()?;
    let server = Binary::start(&[]).await?;
    // Typed clients: protobuf bodies, protobuf answers.
    for (args, said) in [
        (
            &["create", "service", "loadbalancer", "web2", "--tcp=80:8080"][..],
            "service/web2 created",
        ),
        (
            &[
                "create",
                "secret",
                "generic",
                "s1",
                "--from-literal=a=b",
                "--from-literal=empty=",
            ],
            "secret/s1 created",
        ),
        (
            &["create", "configmap", "c1", "--from-literal=k=v"],
            "configmap/c1 created",
        ),
        (&["create", "namespace", "n1"], "namespace/n1 created"),
    ] {
        assert_eq!(kubectl(&server, args).await?.trim(), said);
    }
    let target = kubectl(
        &server,
        &[
            "get",
            "service",
            "web2",
            "-o",
            "jsonpath={.spec.ports[0].targetPort} {.spec.type}",
        ],
    )
    .await?;
    assert_eq!(target, "8080 LoadBalancer");
    let data = kubectl(&server, &["get", "secret", "s1", "-o", "jsonpath={.data}"]).await?;
    assert_eq!(data, r#"{"a":"Yg==","empty":""}"#);
    let described = kubectl(&server, &["describe", "service", "web2"]).await?;
    assert!(
        described.contains("TargetPort:") && described.contains("8080/TCP"),
        "{described}"
    );

    let explained = kubectl(
        &server,
        &[
            "explain",
            "service.spec.type",
            "--output=plaintext-openapiv2",
        ],
    )
    .await?;
    assert!(explained.contains("FIELD:    type <string>"), "{explained}");
    assert!(explained.contains("LoadBalancer"), "{explained}");
    Ok(())
}
