//! The sandbox's last check, as a user would do it with the README's
//! commands: `kubectl get nodes -o wide` shows every node Ready with the
//! address the fake cloud gave it, and a LoadBalancer Service created with
//! kubectl shows its EXTERNAL-IP in `kubectl get service`.

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
        kubectl(kubeconfig).args(["apply", "-f", "-"]),
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
        // The table kubectl prints, as the user reads it.
        let out = kubectl(kubeconfig)
            .args(["get", "service", NAME])
            .output()
            .context("running kubectl get")?;
        let ingress = column(&String::from_utf8_lossy(&out.stdout), "EXTERNAL-IP")
            .into_iter()
            .next()
            .filter(|ip| ip != "<pending>");
        if out.status.success()
            && let Some(ingress) = ingress
        {
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

/// `kubectl get nodes -o wide`: how many nodes it lists, each `Ready` with
/// an INTERNAL-IP (the fake cloud's address, set by the CCM).
pub(crate) fn nodes_ready_with_addresses(kubeconfig: &Path) -> anyhow::Result<usize> {
    let out = kubectl(kubeconfig)
        .args(["get", "nodes", "-o", "wide"])
        .output()
        .context("running kubectl get nodes")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "kubectl get nodes -o wide failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let status = column(&text, "STATUS");
    let internal = column(&text, "INTERNAL-IP");
    if status.is_empty() || status.len() != internal.len() {
        bail!("kubectl get nodes -o wide printed no STATUS and INTERNAL-IP columns:\n{text}");
    }
    if let Some(line) = status
        .iter()
        .zip(&internal)
        .position(|(s, ip)| s != "Ready" || ip.parse::<std::net::IpAddr>().is_err())
    {
        bail!(
            "kubectl get nodes -o wide: node {} is not Ready with an INTERNAL-IP:\n{text}",
            line + 1
        );
    }
    Ok(status.len())
}

/// The cells of column `name` in kubectl's table output `text`, row by row.
fn column(text: &str, name: &str) -> Vec<String> {
    let mut lines = text.lines();
    let Some(index) = lines
        .next()
        .and_then(|header| header.split_whitespace().position(|h| h == name))
    else {
        return Vec::new();
    };
    lines
        .filter_map(|l| l.split_whitespace().nth(index).map(str::to_owned))
        .collect()
}

fn kubectl(kubeconfig: &Path) -> Command {
    let mut cmd = Command::new(crate::tools::kubectl::program());
    cmd.arg("--kubeconfig").arg(kubeconfig);
    cmd
}

#[cfg(test)]
mod tests {
    use super::column;

    #[test]
    fn a_column_is_read_by_its_header() {
        let text = "NAME   TYPE           CLUSTER-IP   EXTERNAL-IP   PORT(S)        AGE\n\
                    web    LoadBalancer   10.0.0.10    <pending>     80:30080/TCP   5s\n";
        assert_eq!(column(text, "EXTERNAL-IP"), ["<pending>"]);
        assert_eq!(column(text, "TYPE"), ["LoadBalancer"]);
        assert!(column(text, "SELECTOR").is_empty());
        assert!(column("", "NAME").is_empty());
    }
}
