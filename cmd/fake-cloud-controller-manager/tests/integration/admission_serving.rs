//! The admission webhook as the binary serves it, on any API server: every
//! replica answers reviews, the standby too; a body that is not a review
//! gets 400; `--webhook-secure-port=0` and an unset `--webhooks` serve
//! nothing. (kube-apiserver calling it is `tests/admission.rs`, on a real
//! cluster.)

use std::time::Duration;

use ccm_test_support::{ApiServer, Ccm, Launch, eventually, free_port};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_fake-cloud-controller-manager");
const WAIT: Duration = Duration::from_secs(60);
/// A value the webhook refuses: the fake fails it, as AWS would.
const MALFORMED: (&str, &str) = (
    "service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval",
    "1",
);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn review() -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7d2e6f0a-0000-4000-8000-000000000007",
            "kind": {"group": "", "version": "v1", "kind": "Service"},
            "resource": {"group": "", "version": "v1", "resource": "services"},
            "name": "web", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "default", "annotations": {MALFORMED.0: MALFORMED.1}},
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            },
        }
    })
}

async fn launch(server: &ApiServer, dir: &std::path::Path, name: &str, webhook: &[String]) -> Ccm {
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, "[settings]\nauto_instances = true\n").unwrap();
    Launch::new(BINARY, dir.join(format!("{name}.log")))
        .credentials(&server.ccm_credentials("fake").await.unwrap())
        .args([
            format!("--cloud-config={}", cloud_config.display()),
            "--controllers=service-lb-controller".to_owned(),
            "--leader-elect-retry-period=1s".to_owned(),
        ])
        .args(webhook.iter().cloned())
        .spawn()
        .unwrap()
}

/// The TCP ports process `pid` listens on: its sockets' inodes looked up
/// in the kernel's table of TCP sockets (state `0A` is LISTEN).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let mut ports: Vec<u16> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
                    let port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
                    (*state == "0A" && inodes.contains(*inode)).then_some(port)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn webhook_args(port: u16) -> Vec<String> {
    vec![
        "--webhooks=service-annotations".to_owned(),
        "--webhook-bind-address=127.0.0.1".to_owned(),
        format!("--webhook-secure-port={port}"),
    ]
}

#[tokio::test]
async fn leader_and_standby_both_answer_reviews() {
    let server = ApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ports = [free_port().unwrap(), free_port().unwrap()];
    let first = launch(&server, dir.path(), "first", &webhook_args(ports[0])).await;
    let second = launch(&server, dir.path(), "second", &webhook_args(ports[1])).await;
    let client = client();
    for port in ports {
        let url = format!("https://127.0.0.1:{port}/validate-service");
        let answer: Value = eventually("the webhook to answer", WAIT, || async {
            let response = client.post(&url).json(&review()).send().await.ok()?;
            response.json().await.ok()
        })
        .await
        .unwrap();
        assert_eq!(
            answer["response"]["uid"],
            "7d2e6f0a-0000-4000-8000-000000000007"
        );
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let status = client
            .post(&url)
            .body("{not json")
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 400);
    }
    for (ccm, webhook) in [(&first, ports[0]), (&second, ports[1])] {
        let mut expected = [ccm.port(), webhook];
        expected.sort_unstable();
        let pid = ccm.pid().expect("the CCM runs");
        assert_eq!(listening_ports(pid), expected, "health and webhook ports");
    }
    // One of the two leads, the other stands by: both answered.
    eventually("one of them to lead", WAIT, || async {
        let leading = [&first, &second]
            .iter()
            .filter(|c| c.log().contains("leading: starting controllers"))
            .count();
        (leading > 0).then_some(())
    })
    .await
    .unwrap();
    let leading = [&first, &second]
        .iter()
        .filter(|c| c.log().contains("leading: starting controllers"))
        .count();
    assert_eq!(leading, 1, "the other stands by, and answered all the same");
    first.terminate().await.unwrap();
    second.terminate().await.unwrap();
}

#[tokio::test]
async fn no_webhook_unless_enabled_and_given_a_port() {
    let server = ApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let [off, unset] = [free_port().unwrap(), free_port().unwrap()];
    let mut args = webhook_args(off);
    args[2] = "--webhook-secure-port=0".to_owned();
    let port_zero = launch(&server, dir.path(), "port-zero", &args).await;
    let not_enabled = launch(
        &server,
        dir.path(),
        "not-enabled",
        &[
            format!("--webhook-secure-port={unset}"),
            "--webhook-bind-address=127.0.0.1".to_owned(),
        ],
    )
    .await;
    for ccm in [&port_zero, &not_enabled] {
        eventually("the CCM to serve its health endpoint", WAIT, || async {
            matches!(ccm.get("/healthz").await, Ok((200, _))).then_some(())
        })
        .await
        .unwrap();
    }
    // Asked of each process's own sockets, not of the port: a port freed by
    // `free_port` may be taken meanwhile by a process of another test.
    for ccm in [&port_zero, &not_enabled] {
        let pid = ccm.pid().expect("the CCM runs");
        assert_eq!(listening_ports(pid), [ccm.port()], "only its health port");
    }
    assert!(!port_zero.log().contains("serving the admission webhook"));
    assert!(!not_enabled.log().contains("serving the admission webhook"));
    port_zero.terminate().await.unwrap();
    not_enabled.terminate().await.unwrap();
}
