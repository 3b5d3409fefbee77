//! The moto harness, shared by this crate's tests and the end-to-end tests of
//! `aws-cloud-controller-manager` (feature `test-util`).
//!
//! One `moto_server` per test process, on a free 127.0.0.1 port, started by
//! the first test that asks for it ([`moto`]). Tests take turns: [`Moto`]
//! holds a lock for the test's duration, and each turn starts from an empty
//! cloud (`POST /moto-api/reset`). The server exits with the test process: it
//! watches its standard input, which only this process holds. A test that
//! counts or throttles the provider's requests puts a [`proxy::Proxy`] in
//! front of moto and builds the provider on its endpoint with [`provider_at`].
//! A test of what a dry run would do runs the provider inside a
//! [`dry_run::DryRun`] fence.
//!
//! moto is PyPI `moto[server]` in a virtualenv under `target/tools/moto`,
//! installed by `cargo xtask ci`. Its known gaps, which tests must not depend
//! on: no `DescribeInstanceTopology` (answered empty by the launcher), no
//! blackhole routes, and `MaxResults`
//! of `DescribeInstances` counting reservations rather than instances.

pub mod dry_run;
pub mod imds;
pub mod proxy;
pub mod seed;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    Node, NodeSpec, Service, ServicePort, ServiceSpec,
};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudConfig, CloudProvider, Environment, InitContext, ProviderFactory};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{MutexGuard, OnceCell};

use crate::AwsProviderFactory;

/// The cluster ID every test's provider belongs to.
pub const CLUSTER: &str = "c1";
/// The region of every client and of the seeded estate.
pub const REGION: &str = "us-east-1";
/// The access key moto is given (it accepts any).
pub const ACCESS_KEY_ID: &str = "testing";
/// The secret key moto is given (it accepts any).
pub const SECRET_ACCESS_KEY: &str = "testing";

/// The moto release the tests are written against (`xtask/src/tools/moto.rs`
/// installs it).
const VERSION: &str = "5.2.5";

/// Runs moto's server like `moto_server`, but exits when its standard input
/// closes, which happens when the test process ends however it ends.
///
/// Two changes make moto answer as AWS does:
/// - Requests are answered one at a time. moto's models are not thread-safe:
///   concurrent `CreateRoute`s into one table once failed one of them with a
///   500 (`dictionary changed size during iteration`), which the provider
///   retried, and a test counting calls failed. AWS serializes such writes.
/// - moto lacks `DescribeInstanceTopology` (a 500); it is answered as AWS
///   answers an account whose instances have no topology, an empty list, so
///   that node initialization in every test does not fail and retry it.
///   Topologies themselves are tested against aws-smithy-mocks.
const LAUNCHER: &str = "import os, sys, threading\n\
from moto.server import main\n\
from moto.core.responses import ActionResult\n\
from moto.ec2.responses import EC2Response\n\
from moto.moto_server.werkzeug_app import DomainDispatcherApplication\n\
EC2Response.describe_instance_topology = lambda self: ActionResult({'Instances': []})\n\
one_at_a_time = threading.Lock()\n\
answer = DomainDispatcherApplication.__call__\n\
def serialized(self, environ, start_response):\n    with one_at_a_time:\n        return list(answer(self, environ, start_response))\n\
DomainDispatcherApplication.__call__ = serialized\n\
def watch():\n    sys.stdin.read()\n    os._exit(0)\n\
threading.Thread(target=watch, daemon=True).start()\n\
main(sys.argv[1:])\n";

/// How long moto may take to answer after starting.
const STARTUP: Duration = Duration::from_secs(60);
/// How long one admin request to moto may take. Dumping its whole state
/// (`data.json`) took over 10 s once on a 2-core machine busy compiling
/// (a CI run failed so): the bound catches a hung moto, not a slow one.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// What can go wrong starting moto, talking to its admin API or seeding it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// moto's virtualenv is not where the project's tooling installs it.
    #[error(
        "moto is not installed at {}: run `cargo xtask ci` (it installs moto[server] {VERSION} there)",
        venv.display()
    )]
    NotInstalled {
        /// The virtualenv looked in.
        venv: PathBuf,
    },
    /// Starting moto, or a connection to it, failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// moto exited before it answered.
    #[error("moto exited ({status}) before answering:\n{log}")]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// Its log.
        log: String,
    },
    /// moto did not answer in time.
    #[error("moto did not answer on port {port} within {STARTUP:?}; see {}", log.display())]
    Unresponsive {
        /// The port it was started on.
        port: u16,
        /// Its log file.
        log: PathBuf,
    },
    /// An admin request got an answer other than 200, or none in time.
    #[error("moto answered {request} with `{status}`")]
    Admin {
        /// Method and path.
        request: String,
        /// The status line, or why there was none.
        status: String,
    },
    /// An AWS call made to seed moto failed.
    #[error("seeding moto: {call} failed")]
    Seed {
        /// The AWS operation.
        call: &'static str,
        /// The SDK's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An AWS call made to seed moto answered without what it creates.
    #[error("seeding moto: {call} answered without {what}")]
    SeedAnswer {
        /// The AWS operation.
        call: &'static str,
        /// What was missing.
        what: &'static str,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

#[derive(Debug)]
struct Server {
    port: u16,
    // Held for the process's lifetime: dropping stdin would stop moto.
    _child: Mutex<Child>,
}

static SERVER: OnceCell<Server> = OnceCell::const_new();
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An empty moto, this test's alone until it is dropped.
#[derive(Debug)]
pub struct Moto {
    /// `http://127.0.0.1:<port>`: the endpoint of every AWS service.
    pub endpoint: String,
    port: u16,
    _turn: MutexGuard<'static, ()>,
}

/// Waits for this test's turn, starting moto if needed, and resets it.
///
/// # Panics
/// When moto is not installed or does not start, with the reason (and the
/// command that installs it).
pub async fn moto() -> Moto {
    let turn = TURN.lock().await;
    let server = SERVER
        .get_or_try_init(start)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    reset(server.port)
        .await
        .unwrap_or_else(|e| panic!("resetting moto: {e}"));
    Moto {
        endpoint: format!("http://127.0.0.1:{}", server.port),
        port: server.port,
        _turn: turn,
    }
}

/// The workspace's target directory, as cargo chooses it.
fn target_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

async fn start() -> Result<Server, Error> {
    let venv = target_dir().join("tools").join("moto");
    let python = venv.join("bin").join("python");
    if !venv.join("bin").join("moto_server").exists() || !python.exists() {
        return Err(Error::NotInstalled { venv });
    }
    let port = ccm_test_support::free_port().map_err(io("finding a free port for moto"))?;
    // One log per test binary, overwritten each run.
    let stem = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tests".to_owned());
    let logs = target_dir().join("tmp");
    std::fs::create_dir_all(&logs).map_err(io(format!("creating {}", logs.display())))?;
    let log = logs.join(format!("moto-{stem}.log"));
    let log_file =
        std::fs::File::create(&log).map_err(io(format!("creating {}", log.display())))?;
    let mut child = Command::new(&python)
        .args(["-c", LAUNCHER, "-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .map_err(io(format!("starting {}", python.display())))?;
    let deadline = tokio::time::Instant::now() + STARTUP;
    loop {
        if reset(port).await.is_ok() {
            break;
        }
        if let Some(status) = child.try_wait().map_err(io("waiting for moto"))? {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(Error::Exited { status, log });
        }
        if tokio::time::Instant::now() > deadline {
            let _ = child.kill();
            return Err(Error::Unresponsive { port, log });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Server {
        port,
        _child: Mutex::new(child),
    })
}

/// `POST /moto-api/reset`: every resource of every service is gone.
async fn reset(port: u16) -> Result<(), Error> {
    admin(port, "POST", "/moto-api/reset").await.map(drop)
}

impl Moto {
    /// moto's whole state as JSON (`GET /moto-api/data.json`), to check
    /// what was done where the AWS API cannot tell.
    ///
    /// # Panics
    /// When moto does not answer with JSON.
    pub async fn state(&self) -> serde_json::Value {
        let body = admin(self.port, "GET", "/moto-api/data.json")
            .await
            .unwrap_or_else(|e| panic!("moto state: {e}"));
        serde_json::from_str(&body).expect("moto state is JSON")
    }

    /// The ARN of a certificate moto's ACM issues for `domain`, for TLS
    /// listeners (moto's ELBv2 checks that the certificate exists). No ACM
    /// client is built for this: one JSON request, routed to ACM by its
    /// credential scope.
    ///
    /// # Panics
    /// When moto does not issue one.
    pub async fn certificate(&self, domain: &str) -> String {
        let answer: serde_json::Value = reqwest::Client::builder()
            .no_proxy()
            .timeout(ADMIN_TIMEOUT)
            .build()
            .expect("an HTTP client")
            .post(&self.endpoint)
            .header("X-Amz-Target", "CertificateManager.RequestCertificate")
            .header("Content-Type", "application/x-amz-json-1.1")
            .header(
                "Authorization",
                format!(
                    "AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/20260101/{REGION}/acm/aws4_request, \
                     SignedHeaders=host, Signature=0"
                ),
            )
            .body(serde_json::json!({ "DomainName": domain }).to_string())
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .unwrap_or_else(|e| panic!("moto's ACM: {e}"))
            .json()
            .await
            .expect("moto's ACM answers JSON");
        answer["CertificateArn"]
            .as_str()
            .unwrap_or_else(|| panic!("moto's ACM issued no certificate: {answer}"))
            .to_owned()
    }
}

/// One HTTP/1.1 request to moto's admin API; the body of a 200 answer.
async fn admin(port: u16, method: &str, path: &str) -> Result<String, Error> {
    let request = format!("{method} {path}");
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = match tokio::time::timeout(ADMIN_TIMEOUT, exchange).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => {
            return Err(Error::Admin {
                request,
                status: e.to_string(),
            });
        }
        Err(_) => {
            return Err(Error::Admin {
                request,
                status: format!("no answer within {ADMIN_TIMEOUT:?}"),
            });
        }
    };
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 200") && !status.starts_with("HTTP/1.0 200") {
        return Err(Error::Admin {
            request,
            status: status.to_owned(),
        });
    }
    Ok(body.to_owned())
}

fn credentials() -> Credentials {
    Credentials::new(ACCESS_KEY_ID, SECRET_ACCESS_KEY, None, None, "moto")
}

/// An EC2 client on moto, for seeding and checking.
pub fn ec2(moto: &Moto) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::from_conf(
        aws_sdk_ec2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&moto.endpoint)
            .credentials_provider(credentials())
            .build(),
    )
}

/// A classic ELB client on moto, for checking and seeding.
pub fn elb(moto: &Moto) -> aws_sdk_elasticloadbalancing::Client {
    aws_sdk_elasticloadbalancing::Client::from_conf(
        aws_sdk_elasticloadbalancing::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&moto.endpoint)
            .credentials_provider(credentials())
            .build(),
    )
}

/// An ELBv2 client on moto, for checking.
pub fn elbv2(moto: &Moto) -> aws_sdk_elasticloadbalancingv2::Client {
    aws_sdk_elasticloadbalancingv2::Client::from_conf(
        aws_sdk_elasticloadbalancingv2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&moto.endpoint)
            .credentials_provider(credentials())
            .build(),
    )
}

/// The cloud config pointing EC2, ELBv2 and STS at moto, with `global`
/// lines added to `[Global]` (which sets `Region` and
/// `KubernetesClusterID`).
pub fn cloud_config(moto: &Moto, global: &str) -> String {
    cloud_config_at(&moto.endpoint, CLUSTER, global)
}

/// The cloud config of cluster `cluster` pointing EC2, ELBv2 and STS at
/// `endpoint` (moto, or a [`proxy::Proxy`] in front of it), with `global`
/// lines added to `[Global]`.
pub fn cloud_config_at(endpoint: &str, cluster: &str, global: &str) -> String {
    format!(
        "[Global]\nRegion = {REGION}\nKubernetesClusterID = {cluster}\n{global}\n{}",
        service_overrides(endpoint)
    )
}

/// `[ServiceOverride "0"]` to `"2"`: EC2, ELBv2 and STS at `endpoint`.
pub fn service_overrides(endpoint: &str) -> String {
    let mut text = String::new();
    for (n, service) in ["ec2", "elasticloadbalancing", "sts"].iter().enumerate() {
        text.push_str(&format!(
            "[ServiceOverride \"{n}\"]\nService = {service}\nRegion = {REGION}\nURL = {endpoint}\nSigningRegion = {REGION}\n"
        ));
    }
    text
}

/// The provider as the app builds it: from [`cloud_config`] and an
/// environment snapshot holding moto's dummy keys, then initialized.
///
/// # Panics
/// When the config is refused or the provider cannot initialize.
pub async fn provider(moto: &Moto, global: &str) -> Arc<dyn CloudProvider> {
    provider_at(&moto.endpoint, CLUSTER, global).await
}

/// The provider of cluster `cluster` as the app builds it, from
/// [`cloud_config_at`] for `endpoint`, then initialized.
///
/// # Panics
/// When the config is refused or the provider cannot initialize.
pub async fn provider_at(endpoint: &str, cluster: &str, global: &str) -> Arc<dyn CloudProvider> {
    let provider = built(&cloud_config_at(endpoint, cluster, global));
    provider
        .initialize(&InitContext::new(cluster))
        .await
        .expect("initialized");
    provider
}

/// The provider as the app builds it from the cloud config `text` and an
/// environment snapshot holding moto's dummy keys, not yet initialized.
///
/// # Panics
/// When the config is refused.
pub fn built(text: &str) -> Arc<dyn CloudProvider> {
    let config = CloudConfig::new("/test/cloud.conf", text);
    let env = Environment::default()
        .with("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
        .with("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY);
    AwsProviderFactory::build(Some(&config), &env).expect("valid cloud config")
}

/// A node named `name`, with `provider_id` if given: what the provider reads
/// of a Node.
pub fn node(name: &str, provider_id: Option<&str>) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        ..Node::default()
    })
}

/// A LoadBalancer Service `shop/web` without a type annotation (a classic
/// ELB), with `annotations` and `(port, node port)` TCP ports.
pub fn classic_service(uid: &str, annotations: &[(&str, &str)], ports: &[(i32, i32)]) -> Service {
    let mut svc = nlb_service(uid, annotations, ports);
    if let Some(a) = svc.metadata.annotations.as_mut()
        && a.get(crate::annotations::TYPE).map(String::as_str) == Some("nlb")
    {
        a.remove(crate::annotations::TYPE);
    }
    svc
}

/// The Service `shop/web` with `uid`, of type LoadBalancer asking for a
/// Network Load Balancer, with `annotations` and TCP `ports` as
/// `(port, node port)`, each named `p<port>`.
pub fn nlb_service(uid: &str, annotations: &[(&str, &str)], ports: &[(i32, i32)]) -> Service {
    let mut all = BTreeMap::from([(crate::annotations::TYPE.to_owned(), "nlb".to_owned())]);
    all.extend(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some(uid.into()),
            annotations: Some(all),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(port, node_port)| ServicePort {
                        name: Some(format!("p{port}")),
                        port: *port,
                        node_port: Some(*node_port),
                        protocol: Some("TCP".into()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The CIDR blocks of `subnets`, sorted.
///
/// # Panics
/// When moto cannot describe them.
pub async fn subnet_cidrs(moto: &Moto, subnets: &[String]) -> Vec<String> {
    let out = ec2(moto)
        .describe_subnets()
        .set_subnet_ids(Some(subnets.to_vec()))
        .send()
        .await
        .expect("subnets described");
    let mut cidrs: Vec<String> = out
        .subnets()
        .iter()
        .filter_map(|s| s.cidr_block().map(str::to_owned))
        .collect();
    cidrs.sort();
    cidrs
}

/// A security-group ingress rule as the tests compare them: protocol, from
/// port, to port, CIDR and description.
pub type IngressRule = (String, i32, i32, String, String);

/// The CIDR ingress rules of security group `group`.
///
/// # Errors
/// When EC2 refuses the description.
pub async fn ingress_rules(
    ec2: &aws_sdk_ec2::Client,
    group: &str,
) -> Result<BTreeSet<IngressRule>, aws_sdk_ec2::Error> {
    let out = ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await?;
    Ok(out
        .security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| {
            p.ip_ranges().iter().map(move |r| {
                (
                    p.ip_protocol().unwrap_or_default().to_owned(),
                    p.from_port().unwrap_or_default(),
                    p.to_port().unwrap_or_default(),
                    r.cidr_ip().unwrap_or_default().to_owned(),
                    r.description().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect())
}
