//! The sandbox's last check, as a user would do it: a LoadBalancer Service
//! created with kubectl gets an ingress from the running CCM.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const NAME: &str = "kubectl-web";

/// The Service the README tells a newcomer to apply.
const MANIFEST: &str = "\
apiVersion: v1
kind: Service
metadata: {name: kubectl-web, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80, targetPort: 8080}]}
";

/// Applies [`MANIFEST`] with kubectl, then waits up to `timeout` for its
/// ingress, reading it back with kubectl too.
pub(crate) fn service_gets_ingress(kubeconfig: &Path, timeout: Duration) -> anyhow::Result<String> {
    let apply = crate::cmd::output_with_stdin(
        kubectl(kubeconfig).args(["apply", "--validate=false", "-f", "-"]),
        MANIFEST.as_bytes(),
    )?;
    if !apply.status.success() {
        bail!(
            "kubectl apply of Service {NAME} failed ({}): {}",
            apply.status,
            String::from_utf8_lossy(&apply.stderr).trim()
        );
    }
    let start = Instant::now();
    loop {
        let out = kubectl(kubeconfig)
            .args([
                "get",
                "service",
                NAME,
                "-o",
                "jsonpath={.status.loadBalancer.ingress[0].ip}",
            ])
            .output()
            .context("running kubectl get")?;
        let ingress = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !ingress.is_empty() {
            return Ok(ingress);
        }
        if start.elapsed() > timeout {
            bail!(
                "Service {NAME}, created with kubectl, has no ingress after {timeout:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn kubectl(kubeconfig: &Path) -> Command {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig").arg(kubeconfig);
    cmd
}
