//! `cargo xtask sandbox`: the CCM against an embedded API server and the
//! fake cloud — the project's main job, for a newcomer with nothing but this
//! repository.

pub(crate) mod access;
mod conditions;
mod kubectl;
pub(crate) mod status;
pub(crate) mod volumes;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cmd::target_dir;
use crate::image::Platform;
use crate::processes::Processes;
use access::Access;
use status::Status;

/// The CCM against an embedded API server and the fake cloud; kubectl-ready.
///
/// Starts an in-memory Kubernetes API server seeded with uninitialized nodes
/// (with pod CIDRs), Services of type LoadBalancer and two PersistentVolumes
/// of the fake cloud (one labelled with its zone, one not), runs the real
/// fake-cloud-controller-manager against it with the fake cloud answering for
/// any node name, shows progress and each LoadBalancer Service's
/// conditions as they change, and leaves you a kubeconfig for kubectl
/// until Ctrl-C.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct Options {
    /// Nodes to seed, node-1..node-N.
    #[arg(long, value_name = "N", default_value_t = 5)]
    nodes: usize,
    /// LoadBalancer Services to seed, lb-1..lb-M.
    #[arg(long, value_name = "M", default_value_t = 2)]
    services: usize,
    /// Exit 0 once everything is initialized, provisioned and labelled, every
    /// LoadBalancer Service says LoadBalancerProvisioned=True and
    /// LoadBalancerTargetsHealthy=True, and a Service created with kubectl
    /// has its ingress, or fail after --timeout; used by `cargo xtask ci`.
    #[arg(long, verbatim_doc_comment)]
    check: bool,
    /// How long --check waits, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 180)]
    timeout: u64,
}

const CLOUD_CONFIG: &str = "\
# The fake cloud of `cargo xtask sandbox`: any node name has a running instance.
[settings]
auto_instances = true
latency_ms = 20
batch_size = 100
";

/// The cloud config: [`CLOUD_CONFIG`] and the seeded volumes.
fn cloud_config_text() -> String {
    format!("{CLOUD_CONFIG}\n{}", volumes::CLOUD_CONFIG_VOLUMES)
}

pub(crate) fn main(options: &Options) -> anyhow::Result<()> {
    run(options, None)
}

/// `sandbox --check` with `binary`, a fake-cloud-controller-manager built
/// for `platform`, as the CCM: an image's binary, under qemu's user-mode
/// emulator when this machine does not run `platform` (`cargo xtask image
/// --check` proves the arm64 binary so).
pub(crate) fn check_binary(binary: &Path, platform: Platform) -> anyhow::Result<()> {
    let options = Options {
        nodes: 3,
        services: 1,
        check: true,
        timeout: 300,
    };
    println!(
        "\nsandbox --check with {} ({}{})",
        binary.display(),
        platform.name(),
        if platform.is_host() {
            String::new()
        } else {
            format!(", under {}", crate::tools::zig::QEMU)
        }
    );
    run(&options, Some((binary, platform)))
}

/// The sandbox, with the debug fake-cloud-controller-manager as its CCM or
/// with `ccm`.
fn run(options: &Options, ccm: Option<(&Path, Platform)>) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(options.timeout);
    crate::processes::build_sandbox_binaries()?;
    let target = target_dir();
    let dir = match ccm {
        None => target.join("sandbox"),
        Some((_, platform)) => target.join(format!("sandbox-{}", platform.dir_name())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let ccm_binary = match ccm {
        None => target.join("debug/fake-cloud-controller-manager"),
        Some((binary, platform)) if platform.is_host() => binary.to_owned(),
        Some((binary, _)) => under_qemu(&dir, binary)?,
    };
    let kubeconfig = dir.join("kubeconfig");
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, cloud_config_text())?;

    let access = Access::write(&dir)?;

    let mut processes = Processes::new(&dir);
    let api = processes.start_api_server_with(
        &target.join("debug/test-apiserver"),
        &kubeconfig,
        options.nodes,
        options.services,
        &access.api_server_args(),
    )?;
    access.grant(api)?;
    volumes::seed(api, Some(access.admin_token()))?;
    let metrics = processes.start_ccm(&ccm_binary, &kubeconfig, &cloud_config)?;
    println!("API server  {api}");
    println!(
        "CCM         /metrics on https://{metrics}/metrics, log in {}",
        dir.join("ccm.log").display()
    );
    println!("kubectl     export KUBECONFIG={}", kubeconfig.display());
    println!("metrics     {}", access.curl_line(metrics));
    println!();
    if options.check {
        crate::tools::kubectl::ensure()?;
    }

    let start = Instant::now();
    let mut last_line = String::new();
    let mut shown = conditions::Observed::new();
    // What --check still waits for: Services without both conditions True.
    let mut unsettled = Vec::new();
    let mut announced = false;
    loop {
        processes.check_alive()?;
        match Status::read_as(
            api,
            metrics,
            Some(access.admin_token()),
            Some(access.metrics_reader_token()),
        ) {
            Ok(status) => {
                let elapsed = start.elapsed().as_secs_f64();
                let line = status.line();
                if line != last_line {
                    println!("[{elapsed:>5.1}s] {line}");
                    last_line = line;
                }
                for line in conditions::changes(&shown, status.conditions()) {
                    println!("[{elapsed:>5.1}s] {line}");
                }
                shown.clone_from(status.conditions());
                unsettled = conditions::not_all_true(&shown)
                    .into_iter()
                    .map(str::to_owned)
                    .collect();
                let settled = !options.check || unsettled.is_empty();
                if status.complete() && settled && !announced {
                    announced = true;
                    println!(
                        "\nall nodes initialized, all load balancers provisioned, all routes created, all volumes labelled"
                    );
                    if options.check {
                        println!(
                            "every LoadBalancer Service printed {}: {}",
                            conditions::TYPES.map(|t| format!("{t}=True")).join(" and "),
                            shown.keys().cloned().collect::<Vec<_>>().join(", ")
                        );
                        refuses_metrics_without_a_token(metrics)?;
                        let left = timeout.saturating_sub(start.elapsed());
                        let nodes = kubectl::nodes_ready_with_addresses(&kubeconfig)?;
                        println!(
                            "kubectl get nodes -o wide: {nodes} nodes Ready, each with an INTERNAL-IP"
                        );
                        let [applied, created] = kubectl::services_get_ingress(&kubeconfig, left)?;
                        println!(
                            "Services made with kubectl apply and kubectl create service show their EXTERNAL-IP in kubectl get service: {applied}, {created}"
                        );
                        return Ok(());
                    }
                    explain(&kubeconfig, &access.curl_line(metrics));
                }
            }
            Err(err) => println!("[{:>5.1}s] waiting: {err:#}", start.elapsed().as_secs_f64()),
        }
        if options.check && start.elapsed() > timeout {
            if unsettled.is_empty() {
                bail!("not complete after {timeout:?}: {last_line}");
            }
            bail!(
                "not complete after {timeout:?}: {last_line}; without {} both True: {}",
                conditions::TYPES.join(" and "),
                unsettled.join(", ")
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A script in `dir` that runs `binary` under qemu-aarch64 with the
/// arguments it is given.
fn under_qemu(dir: &Path, binary: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("ccm-under-qemu");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} '{}' \"$@\"\n",
            crate::tools::zig::QEMU,
            binary.display()
        ),
    )
    .with_context(|| format!("writing {}", script.display()))?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    Ok(script)
}

/// The CCM's `/metrics` answers 401 to a request without a token: the
/// reader's grant is what lets the printed curl line through.
fn refuses_metrics_without_a_token(metrics: SocketAddr) -> anyhow::Result<()> {
    let response = crate::http::get_https(metrics, "/metrics").context("the CCM's /metrics")?;
    if response.status != 401 {
        bail!(
            "the CCM's /metrics answered {} without a token, not 401",
            response.status
        );
    }
    println!("/metrics without a token: 401; with the metrics-reader's token: 200");
    Ok(())
}

fn explain(kubeconfig: &Path, curl: &str) {
    println!(
        "\nKeep going with kubectl (Ctrl-C stops the sandbox):\n\n    export KUBECONFIG={}\n    kubectl get nodes -o wide\n    kubectl apply -f - <<'EOF'\n    apiVersion: v1\n    kind: Service\n    metadata: {{name: web, namespace: default}}\n    spec: {{type: LoadBalancer, ports: [{{port: 80, targetPort: 8080}}]}}\n    EOF\n    kubectl create service loadbalancer web2 --tcp=80:8080\n    kubectl get services -w\n\nRead the CCM's metrics as user metrics-reader:\n\n    {curl}\n",
        kubeconfig.display()
    );
}

#[cfg(test)]
mod tests {
    use crate::{Task, parse_task};

    fn parse(args: &[&str]) -> Result<super::Options, clap::Error> {
        match parse_task(&[&["sandbox"], args].concat())? {
            Task::Sandbox(options) => Ok(options),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn counts_parse_with_or_without_an_equals_sign() {
        assert_eq!(parse(&["--nodes=5"]).unwrap().nodes, 5);
        assert_eq!(parse(&["--nodes", "5"]).unwrap().nodes, 5);
        let options = parse(&["--services=7", "--nodes", "3"]).unwrap();
        assert_eq!((options.nodes, options.services), (3, 7));
    }

    #[test]
    fn defaults_are_a_small_cluster_and_three_minutes() {
        let options = parse(&[]).unwrap();
        assert_eq!(
            (
                options.nodes,
                options.services,
                options.check,
                options.timeout
            ),
            (5, 2, false, 180)
        );
        assert!(parse(&["--check", "--timeout=30"]).unwrap().check);
    }

    #[test]
    fn bad_values_and_unknown_options_are_refused() {
        assert!(parse(&["--nodes", "many"]).is_err());
        assert!(parse(&["--timeout", "-1"]).is_err());
        assert!(parse(&["--frobnicate"]).is_err());
    }
}
