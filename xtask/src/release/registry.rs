//! A container registry on loopback: Debian's `docker-registry` (the CNCF
//! distribution registry), with its storage under target/, for CI to push
//! a release to and read it back.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::http;
use crate::tools::apt;

/// A running registry, stopped when dropped.
pub(crate) struct Registry {
    child: Child,
    addr: SocketAddr,
}

impl Registry {
    /// Starts a registry on a free loopback port, storing under `dir`
    /// (emptied first), and waits until it answers `/v2/` (at most 30 s).
    pub(crate) fn start(dir: &Path) -> anyhow::Result<Self> {
        if !apt::has("docker-registry") {
            apt::install(&["docker-registry"])?;
        }
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage)
            .with_context(|| format!("creating {}", storage.display()))?;
        let addr: SocketAddr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                storage.display()
            ),
        )?;
        let log = std::fs::File::create(dir.join("registry.log"))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting docker-registry")?;
        let mut registry = Self { child, addr };
        let started = Instant::now();
        loop {
            if http::get(addr, "/v2/").is_ok_and(|r| r.status == 200) {
                println!("registry: docker-registry serving on {addr}");
                return Ok(registry);
            }
            if let Some(status) = registry.child.try_wait()? {
                bail!(
                    "docker-registry exited ({status}); its log is {}",
                    dir.join("registry.log").display()
                );
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("docker-registry did not answer /v2/ on {addr} within 30 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `127.0.0.1:<port>`.
    pub(crate) fn host(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
