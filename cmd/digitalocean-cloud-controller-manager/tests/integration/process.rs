//! The binary as a process: exit codes, the controllers it runs, shutdown.

use crate::support;

use std::time::Duration;

use ccm_provider_digitalocean::test_util::account;
use ccm_test_support::ApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::ccm::{self, run_to_exit};
use support::{ccm_args, do_env};

/// The lines a process wrote to standard error, blank ones left out.
fn stderr_lines(output: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_missing_access_token_exits_64_with_one_line_naming_the_variable() {
    let output = run_to_exit(&[("REGION", "nyc3".to_owned())], &[])
        .await
        .unwrap();

    assert_eq!(output.status.code(), Some(64), "{output:?}");
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("DO_ACCESS_TOKEN"), "{lines:?}");
    assert!(output.stdout.is_empty());
}

#[tokio::test]
async fn a_bad_flag_exits_64_with_one_line_naming_it() {
    let output = run_to_exit(&[], &["--node-monitor-period=soon"])
        .await
        .unwrap();

    assert_eq!(output.status.code(), Some(64), "{output:?}");
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("--node-monitor-period"), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_controller_is_off_because_digitalocean_has_no_routes() {
    let account = account();
    let server = ApiServer::start().await.unwrap();
    let mut args = ccm_args();
    // Everything the route controller needs but a cloud with routes.
    args.extend([
        "--allocate-node-cidrs=true".to_owned(),
        "--configure-cloud-routes=true".to_owned(),
        "--cluster-cidr=10.244.0.0/16".to_owned(),
    ]);
    let ccm = ccm::start(&server, &do_env(&account), &args).await.unwrap();

    let metrics = ccm.metrics().await.unwrap();
    for (controller, running) in [
        ("route", 0),
        ("cloud-node", 1),
        ("cloud-node-lifecycle", 1),
        ("service", 1),
    ] {
        let line = format!("ccm_controller_running{{controller=\"{controller}\"}} {running}");
        assert!(
            metrics.lines().any(|l| l == line),
            "no `{line}` in /metrics:\n{metrics}"
        );
    }
    assert!(
        ccm.log()
            .contains("the cloud provider does not support routes"),
        "{}",
        ccm.log()
    );
}

async fn lease_holder(server: &ApiServer) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    leases
        .get("cloud-controller-manager")
        .await
        .expect("the CCM's Lease")
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_it_with_exit_0_after_releasing_its_lease() {
    let account = account();
    let server = ApiServer::start().await.unwrap();
    // Without DO_CLUSTER_ID, as upstream's DigitalOcean CCM runs.
    let env: Vec<_> = do_env(&account)
        .into_iter()
        .filter(|(k, _)| *k != "DO_CLUSTER_ID")
        .collect();
    let mut ccm = ccm::start(&server, &env, &ccm_args()).await.unwrap();
    assert!(lease_holder(&server).await.is_some(), "a ready CCM leads");

    ccm.terminate().await.unwrap();
    let status = ccm.wait(Duration::from_secs(30)).await.unwrap();

    assert_eq!(status.code(), Some(0), "{}", ccm.log());
    assert_eq!(
        lease_holder(&server).await,
        None,
        "the Lease is released on the way out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_metrics_and_debug_addresses_are_accepted_and_served_on_the_secure_port() {
    let account = account();
    let server = ApiServer::start().await.unwrap();
    let mut env = do_env(&account);
    env.extend([
        ("METRICS_ADDR", "0.0.0.0:8080".to_owned()),
        ("DEBUG_ADDR", ":8081".to_owned()),
    ]);
    let ccm = ccm::start(&server, &env, &ccm_args()).await.unwrap();

    assert!(
        ccm.metrics()
            .await
            .unwrap()
            .contains("ccm_controller_running")
    );
    for var in ["METRICS_ADDR=0.0.0.0:8080", "DEBUG_ADDR=:8081"] {
        let said = ccm.log().matches(var).count();
        assert_eq!(said, 1, "{var} is logged once:\n{}", ccm.log());
    }
}

#[tokio::test]
async fn a_bad_upstream_variable_exits_64_naming_it() {
    for (var, value) in [
        ("DEFAULT_LB_TYPE", "GLOBAL"),
        ("METRICS_ADDR", "localhost"),
        ("PUBLIC_ACCESS_FIREWALL_NAME", "fw"),
    ] {
        let mut env = vec![
            ("DO_ACCESS_TOKEN", "dop_v1_secret_value".to_owned()),
            ("REGION", "nyc3".to_owned()),
        ];
        env.push((var, value.to_owned()));
        let output = run_to_exit(&env, &[]).await.unwrap();
        assert_eq!(output.status.code(), Some(64), "{var}: {output:?}");
        let lines = stderr_lines(&output);
        assert_eq!(lines.len(), 1, "{var}: {lines:?}");
        assert!(lines[0].contains(var), "{lines:?}");
        assert!(!lines[0].contains("dop_v1_secret_value"), "{lines:?}");
    }
}
