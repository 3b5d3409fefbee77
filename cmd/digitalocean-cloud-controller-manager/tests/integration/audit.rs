//! `digitalocean-cloud-controller-manager audit` against the fake API: a
//! load balancer tagged for the cluster whose Service is gone is listed,
//! `--delete --yes` removes exactly it, and a second audit lists nothing;
//! a live Service's load balancer is never listed.

use crate::support;

use ccm_cloud_provider::CloudProvider;
use ccm_provider_digitalocean::test_util::{Account, account};
use ccm_test_support::{ApiServer, Credentials, Launch, load_balancer_service, unique};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use serde_json::Value;
use support::{CLUSTER_ID, REGION, ccm_args, do_env};

/// Runs `audit` with `extra` flags against `api` and `account`.
async fn audit(
    account: &Account,
    credentials: &Credentials,
    extra: &[&str],
) -> (i32, String, String) {
    let kubeconfig = format!("--kubeconfig={}", credentials.kubeconfig.display());
    let mut args = vec!["audit", kubeconfig.as_str()];
    args.extend_from_slice(extra);
    let flags = ccm_args();
    args.extend(flags.iter().map(String::as_str));
    // The subcommand comes first, before any flag.
    let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("do-audit"));
    let mut launch = Launch::new(support::ccm::BINARY, log).args(args);
    for (key, value) in do_env(account) {
        launch = launch.env(key, value);
    }
    let output = launch.output().await.expect("the audit ran");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn names(account: &Account) -> Vec<String> {
    let mut names: Vec<String> = account
        .load_balancers()
        .iter()
        .filter_map(|lb| lb["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn audit_lists_and_deletes_exactly_the_leaked_load_balancer() {
    let account = account();
    account.set_activate_after_reads(0);
    let env = account
        .env()
        .with("DO_CLUSTER_ID", CLUSTER_ID)
        .with("REGION", REGION);
    let provider = account.provider_with(&env).await;
    let lb = provider
        .load_balancer()
        .expect("DigitalOcean has load balancers");
    let api = ApiServer::start().await.expect("an API server");
    let admin = Credentials {
        kubeconfig: api.kubeconfig_path().to_owned(),
        rbac_limited: false,
    };
    let services: Api<Service> = Api::namespaced(api.client(), "default");
    let live = services
        .create(&PostParams::default(), &load_balancer_service("live", &[]))
        .await
        .expect("created");
    lb.ensure_load_balancer("e2e", &live, &[])
        .await
        .expect("ensured");
    let live_name = lb.load_balancer_name("e2e", &live);
    let mut gone = load_balancer_service("gone", &[]);
    gone.metadata.namespace = Some("default".into());
    gone.metadata.uid = Some("0deadbee-0000-4000-8000-00000000dead".into());
    // As the API server would have allocated it.
    for port in gone
        .spec
        .iter_mut()
        .flat_map(|s| s.ports.iter_mut().flatten())
    {
        port.node_port = Some(30081);
    }
    lb.ensure_load_balancer("e2e", &gone, &[])
        .await
        .expect("ensured");
    let gone_name = lb.load_balancer_name("e2e", &gone);
    assert_eq!(names(&account).len(), 2);

    let (code, stdout, stderr) = audit(&account, &admin, &["-o", "json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let leaked = report["leaked"].as_array().expect("a list");
    assert_eq!(leaked.len(), 1, "{report:#}");
    assert_eq!(leaked[0]["kind"], "load-balancer");
    assert_eq!(leaked[0]["name"], gone_name.as_str(), "{report:#}");

    let (code, stdout, stderr) = audit(&account, &admin, &["--delete", "--yes"]).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("deleted load-balancer "))
            .count(),
        1,
        "{stdout}"
    );
    assert_eq!(names(&account), vec![live_name]);

    let (code, stdout, stderr) = audit(&account, &admin, &[]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("No leaked cloud resources."), "{stdout}");
}
