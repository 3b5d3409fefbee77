//! The fake cloud's server as a child process, and what the suites ask it:
//! its state, its call log, its crash trap and its faults.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long the server may take to print its address.
const START_WITHIN: Duration = Duration::from_secs(20);

/// One call in the server's log (the fields the suites read).
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) caller: String,
    pub(crate) op: String,
    pub(crate) applied: bool,
    /// When it reached the cloud, in µs since the Unix epoch.
    pub(crate) started_us: i64,
}

/// A load balancer in the cloud.
#[derive(Debug, Clone)]
pub(crate) struct CloudLoadBalancer {
    pub(crate) name: String,
    pub(crate) service: String,
    pub(crate) nodes: Vec<String>,
    pub(crate) ip: String,
}

/// A route in the cloud.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CloudRoute {
    pub(crate) cluster: String,
    pub(crate) cidr: String,
    pub(crate) node: String,
}

/// The cloud's state.
#[derive(Debug, Clone, Default)]
pub(crate) struct CloudState {
    pub(crate) load_balancers: Vec<CloudLoadBalancer>,
    pub(crate) routes: Vec<CloudRoute>,
}

/// The running `fake-cloud` process.
#[derive(Debug)]
pub(crate) struct CloudProcess {
    /// Killed when dropped.
    _child: Child,
    url: String,
    http: reqwest::Client,
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

impl CloudProcess {
    /// Starts `binary` with a config that answers for any node name.
    pub(crate) async fn start(binary: &Path, dir: &Path, seed: u64) -> anyhow::Result<Self> {
        let config = dir.join("fake-cloud.toml");
        std::fs::write(&config, "[settings]\nauto_instances = true\n")?;
        let log = std::fs::File::create(dir.join("fake-cloud.log"))?;
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--seed", &seed.to_string()])
            .arg("--cloud-config")
            .arg(&config)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().context("the server's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(START_WITHIN, lines.next_line())
            .await
            .context("the fake cloud did not print its address in time")??
            .context("the fake cloud exited before printing its address")?;
        let Some(url) = line.strip_prefix("listening on ") else {
            bail!("the fake cloud printed {line:?}");
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            _child: child,
            url: url.to_owned(),
            http: reqwest::Client::builder().no_proxy().build()?,
        })
    }

    /// The URL replicas' cloud-configs name.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let response = self.http.get(format!("{}{path}", self.url)).send().await?;
        anyhow::ensure!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        Ok(response.json().await?)
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> anyhow::Result<()> {
        let response = self
            .http
            .request(method.clone(), format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            bail!(
                "{method} {path}: {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// `GET path`'s body as it came, for the logs a failing run keeps.
    pub(crate) async fn raw(&self, path: &str) -> anyhow::Result<String> {
        Ok(self.get(path).await?.to_string())
    }

    /// `GET /state`.
    pub(crate) async fn state(&self) -> anyhow::Result<CloudState> {
        let state = self.get("/state").await?;
        let load_balancers = state["load_balancers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|lb| CloudLoadBalancer {
                name: text(lb, "name"),
                service: text(lb, "service"),
                nodes: lb["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
                ip: text(lb, "ip"),
            })
            .collect();
        let routes = state["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| CloudRoute {
                cluster: text(r, "cluster"),
                cidr: text(r, "destination_cidr"),
                node: text(r, "target_node"),
            })
            .collect();
        Ok(CloudState {
            load_balancers,
            routes,
        })
    }

    /// `GET /calls`: the whole call log.
    pub(crate) async fn calls(&self) -> anyhow::Result<Vec<Call>> {
        let calls = self.get("/calls").await?;
        Ok(calls
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| Call {
                caller: text(c, "caller"),
                op: text(c, "op"),
                applied: c["applied"].as_bool().unwrap_or(false),
                started_us: c["started_us"].as_i64().unwrap_or_default(),
            })
            .collect())
    }

    /// Successful mutations so far, and whether the trap tripped.
    pub(crate) async fn trap(&self) -> anyhow::Result<(u64, bool)> {
        let status = self.get("/crash").await?;
        Ok((
            status["mutations"].as_u64().unwrap_or_default(),
            status["tripped"].as_bool().unwrap_or(false),
        ))
    }

    /// Traps the `k`-th successful mutation from now.
    pub(crate) async fn arm(&self, k: u64) -> anyhow::Result<()> {
        self.send(
            reqwest::Method::POST,
            "/crash",
            json!({ "after_mutations": k }),
        )
        .await
    }

    /// Releases the trap.
    pub(crate) async fn release(&self) -> anyhow::Result<()> {
        self.send(reqwest::Method::DELETE, "/crash", json!({}))
            .await
    }

    /// `PUT /faults`.
    pub(crate) async fn set_faults(&self, faults: Value) -> anyhow::Result<()> {
        self.send(reqwest::Method::PUT, "/faults", faults).await
    }
}
