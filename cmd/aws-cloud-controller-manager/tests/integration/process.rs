//! The `aws-cloud-controller-manager` process itself: how it refuses a bad
//! cloud config, and how it stops on SIGTERM.

use crate::support;

use std::time::Duration;

use ccm_provider_aws::test_util::imds::Imds;
use ccm_test_support::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::E2e;
use support::ccm::launch;

/// The Lease upstream's default flags name.
const LEASE: &str = "cloud-controller-manager";

#[tokio::test]
async fn an_unknown_cloud_config_key_exits_64_naming_file_line_and_key() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("cloud.conf");
    std::fs::write(
        &config,
        "[Global]\nRegion = us-east-1\nKubernetesClusterID = c1\nVPCC = vpc-0123456789abcdef0\n",
    )?;
    let args = vec![
        format!("--cloud-config={}", config.display()),
        // Unreachable on purpose: a bad config must be refused before any
        // connection is tried.
        "--master=http://127.0.0.1:9".to_owned(),
        "--secure-port=0".to_owned(),
    ];
    let (status, output) = launch("bad-config", &args).run_to_exit().await?;
    assert_eq!(status.code(), Some(64), "{output}");
    assert_eq!(
        output.lines().collect::<Vec<_>>(),
        [format!(
            "aws-cloud-controller-manager: {}:4: unknown key `VPCC` in [Global]",
            config.display()
        )],
        "one line naming the file, the line and the key"
    );
    Ok(())
}

#[tokio::test]
async fn a_cluster_nothing_names_exits_64_saying_what_to_set() -> anyhow::Result<()> {
    // Instance metadata (a loopback stand-in) knows no instance ID, so the
    // cluster tag cannot be read, and `--cluster-name` must not stand in.
    let imds = Imds::start(&[]).await?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("cloud.conf");
    std::fs::write(
        &config,
        format!("[Global]\nRegion = us-east-1\n{}", imds.service_override(0)),
    )?;
    let args = vec![
        format!("--cloud-config={}", config.display()),
        "--cluster-name=kubernetes".to_owned(),
        "--configure-cloud-routes=false".to_owned(),
        "--master=http://127.0.0.1:9".to_owned(),
        "--secure-port=0".to_owned(),
    ];
    let (status, output) = launch("no-cluster-id", &args).run_to_exit().await?;
    assert_eq!(status.code(), Some(64), "{output}");
    let lines: Vec<&str> = output.lines().filter(|l| !l.contains(" INFO ")).collect();
    assert_eq!(lines.len(), 1, "one line: {output}");
    assert!(
        lines[0].starts_with(
            "aws-cloud-controller-manager: the aws provider could not initialize: invalid \
             KubernetesClusterID: not set in [Global] of the cloud config, and this instance's \
             cluster tag cannot be read"
        ) && lines[0].contains("set KubernetesClusterID"),
        "{output}"
    );
    Ok(())
}

#[tokio::test]
async fn sigterm_exits_0_and_releases_the_lease() -> anyhow::Result<()> {
    let mut e2e = E2e::start("sigterm", 1, &[]).await?;
    let leases: Api<Lease> = Api::namespaced(e2e.client.clone(), "kube-system");
    let holder = eventually(
        "the CCM holding the Lease",
        Duration::from_secs(30),
        || async {
            let lease = leases.get_opt(LEASE).await?;
            Ok(lease
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty()))
        },
    )
    .await?;
    assert!(!holder.is_empty());

    e2e.ccm.terminate().await?;
    let status = e2e.ccm.wait(Duration::from_secs(30)).await?;
    assert_eq!(status.code(), Some(0), "{}", e2e.ccm.log_tail());
    let spec = leases
        .get(LEASE)
        .await?
        .spec
        .ok_or_else(|| anyhow::anyhow!("the Lease has no spec"))?;
    assert_eq!(
        spec.holder_identity.as_deref().unwrap_or_default(),
        "",
        "released: no holder"
    );
    assert_eq!(
        spec.lease_duration_seconds,
        Some(1),
        "released as client-go's ReleaseOnCancel: a one-second lease another replica takes at once"
    );
    Ok(())
}
