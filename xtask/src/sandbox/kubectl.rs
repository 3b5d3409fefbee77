//! The sandbox's last check, as a user would do it with the README's
//! commands: `kubectl get nodes -o wide` shows every node Ready with the
//! address the fake cloud gave it, and a LoadBalancer Service created with
//! `kubectl apply` (JSON) and one created with `kubectl create service`
//! (protobuf) each show their EXTERNAL-IP in `kubectl get service`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const NAME: &str = "kubectl-web";

/// The Service the README tells a newcomer to create with `kubectl create`.
const CREATED: &str = "kubectl-web2";

/// The Service the README tells a newcomer to apply.
const MANIFEST: &str = "\
apiVersion: v1
kind: Service
metadata: {name: kubectl-web, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80, targetPort: 8080}]}
";

/// Applies [`MANIFEST`] with kubectl and creates [`CREATED`] with `kubectl
/// create service loadbalancer`, then waits up to `timeout` for their
/// ingresses, reading them back with kubectl too.
pub(crate) fn services_get_ingress(
    kubeconfig: &Path,
    timeout: Duration,
) -> anyhow::Result<[String; 2]> {
    let start = Instant::now();
    let apply = crate::cmd::output_with_stdin(
        kubectl(kubeconfig).args(["apply", "-f", "-"]),
        MANIFEST.as_bytes(),
    )?;
    succeeded(&apply, &format!("kubectl apply of Service {NAME}"))?;
    let create = kubectl(kubeconfig)
        .args([
            "create",
            "service",
            "loadbalancer",
            CREATED,
            "--tcp=80:8080",
        ])
        .output()
        .context("running kubectl create service")?;
    succeeded(
        &create,
        &format!("kubectl create service loadbalancer {CREATED}"),
    )?;
    let applied = ingress(kubeconfig, NAME, timeout.saturating_sub(start.elapsed()))?;
    let created = ingress(kubeconfig, CREATED, timeout.saturating_sub(start.elapsed()))?;
    Ok([applied, created])
}

fn succeeded(out: &std::process::Output, what: &str) -> anyhow::Result<()> {
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Waits up to `timeout` for Service `name`'s EXTERNAL-IP in `kubectl get
/// service`.
fn ingress(kubeconfig: &Path, name: &str, timeout: Duration) -> anyhow::Result<String> {
    let start = Instant::now();
    loop {
        // The table kubectl prints, as the user reads it.
        let out = kubectl(kubeconfig)
            .args(["get", "service", name])
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
                "Service {name}, created with kubectl, has no ingress after {timeout:?}: {}",
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
