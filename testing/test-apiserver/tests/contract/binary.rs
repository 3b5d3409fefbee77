//! The `test-apiserver` binary: flags, seeding, its kubeconfig.

use crate::support;

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::ListParams;
use support::process::Binary;

#[tokio::test]
async fn seeds_kubelet_registered_nodes_and_load_balancer_services() -> anyhow::Result<()> {
    let server = Binary::start(&["--nodes", "3", "--services", "2"]).await?;
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let client = server.client().await?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let names: Vec<_> = nodes
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["node-1", "node-2", "node-3"]);
    let node = &nodes.items[1];
    let spec = node.spec.clone().context("spec")?;
    assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.2.0/24"));
    assert_eq!(spec.pod_cidrs, Some(vec!["10.244.2.0/24".to_owned()]));
    let taint = spec.taints.context("taints")?.pop().context("a taint")?;
    assert_eq!(
        (
            taint.key.as_str(),
            taint.value.as_deref(),
            taint.effect.as_str()
        ),
        (
            ccm_test_apiserver::UNINITIALIZED_TAINT,
            Some("true"),
            "NoSchedule"
        )
    );
    let status = node.status.clone().context("status")?;
    let ready = status
        .conditions
        .context("conditions")?
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .context("Ready")?;
    assert_eq!(ready.status, "True");
    let addresses: Vec<_> = status
        .addresses
        .context("addresses")?
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(addresses, [("Hostname".to_owned(), "node-2".to_owned())]);

    let services = Api::<Service>::namespaced(client, "default")
        .list(&ListParams::default())
        .await?;
    let lbs: Vec<&Service> = services
        .items
        .iter()
        .filter(|s| {
            s.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("lb-"))
        })
        .collect();
    assert_eq!(lbs.len(), 2);
    for lb in lbs {
        let spec = lb.spec.clone().context("spec")?;
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        let ports = spec.ports.context("ports")?;
        assert_eq!(ports.len(), 1);
        assert_eq!(
            (ports[0].port, ports[0].protocol.as_deref()),
            (80, Some("TCP"))
        );
        assert!(ports[0].node_port.is_some());
    }
    Ok(())
}

async fn exit_of(args: &[&str]) -> anyhow::Result<(Option<i32>, String)> {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_test-apiserver"))
            .args(args)
            .output(),
    )
    .await
    .context("the binary did not exit")??;
    Ok((output.status.code(), String::from_utf8(output.stderr)?))
}

#[tokio::test]
async fn bad_flags_exit_64_with_one_line() -> anyhow::Result<()> {
    for args in [
        &["--nodes", "many"][..],
        &["--bind", "10.0.0.1:80"],
        &["--frobnicate"],
        &["--services"],
    ] {
        let (code, stderr) = exit_of(args).await?;
        assert_eq!(code, Some(64), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("test-apiserver: "), "{stderr}");
        assert!(stderr.contains(args[0]), "{args:?}: {stderr}");
    }
    let (code, _) = exit_of(&["--help"]).await?;
    assert_eq!(code, Some(0));
    Ok(())
}

#[tokio::test]
async fn binds_the_address_it_is_given() -> anyhow::Result<()> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], ccm_test_support::free_port()?));
    let server = Binary::start(&["--bind", &addr.to_string()]).await?;
    assert_eq!(server.url, format!("http://{addr}"));
    let kubeconfig = std::fs::read_to_string(&server.kubeconfig)?;
    assert!(
        kubeconfig.contains(&format!("server: http://{addr}")),
        "{kubeconfig}"
    );
    Ok(())
}

#[tokio::test]
async fn a_malformed_token_file_exits_64_without_echoing_tokens() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tokens.csv");
    std::fs::write(&path, "secret-token,\"unterminated\n")?;
    let file = path.to_string_lossy();
    let (code, stderr) = exit_of(&["--token-auth-file", &file]).await?;
    assert_eq!(code, Some(64), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("line 1"), "{stderr}");
    assert!(!stderr.contains("secret-token"), "{stderr}");
    let (code, stderr) = exit_of(&["--token-auth-file", "/nonexistent/tokens.csv"]).await?;
    assert_eq!(code, Some(64), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn with_a_token_file_the_kubeconfig_is_the_administrators() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tokens.csv");
    std::fs::write(&path, "root-token,root,1,system:masters\n")?;
    let file = path.to_string_lossy();
    let server = Binary::start(&[
        "--nodes=1",
        "--token-auth-file",
        &file,
        "--authorization-mode=RBAC",
    ])
    .await?;
    let nodes = Api::<Node>::all(server.client().await?)
        .list(&ListParams::default())
        .await?;
    assert_eq!(nodes.items.len(), 1);
    let anonymous = kube::Client::try_from(kube::Config::new(server.url.parse()?))?;
    let refused = Api::<Node>::all(anonymous)
        .list(&ListParams::default())
        .await
        .expect_err("anonymous requests may not list nodes");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused}"
    );
    Ok(())
}
