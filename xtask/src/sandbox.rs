//! `cargo xtask sandbox`: the CCM against an embedded API server and the
//! fake cloud — the project's main job, for a newcomer with nothing but this
//! repository.

mod kubectl;
pub(crate) mod status;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cmd::{cargo, run, target_dir};
use crate::processes::Processes;
use status::Status;

const USAGE: &str =
    "usage: cargo xtask sandbox [--nodes N] [--services M] [--check] [--timeout SECONDS]

Starts an in-memory Kubernetes API server seeded with N uninitialized nodes
(default 5, with pod CIDRs) and M Services of type LoadBalancer (default 2),
runs the real fake-cloud-controller-manager against it with the fake cloud
answering for any node name, shows progress, and leaves you a kubeconfig for
kubectl until Ctrl-C.

  --check      exit 0 once everything is initialized and provisioned and a
               Service created with kubectl has its ingress, or fail after
               --timeout (default 180 s); used by `cargo xtask ci`";

#[derive(Debug)]
struct Options {
    nodes: usize,
    services: usize,
    check: bool,
    timeout: Duration,
}

fn parse(args: &[String]) -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        nodes: 5,
        services: 2,
        check: false,
        timeout: Duration::from_secs(180),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--nodes" => {
                options.nodes = value("--nodes")?
                    .parse()
                    .context("--nodes: expected a number")?;
            }
            "--services" => {
                options.services = value("--services")?
                    .parse()
                    .context("--services: expected a number")?;
            }
            "--timeout" => {
                options.timeout = Duration::from_secs(
                    value("--timeout")?
                        .parse()
                        .context("--timeout: expected seconds")?,
                );
            }
            "--check" => options.check = true,
            other => bail!("unknown option `{other}`\n\n{USAGE}"),
        }
    }
    Ok(Some(options))
}

const CLOUD_CONFIG: &str = "\
# The fake cloud of `cargo xtask sandbox`: any node name has a running instance.
[settings]
auto_instances = true
latency_ms = 20
batch_size = 100
";

pub(crate) fn main(args: &[String]) -> anyhow::Result<()> {
    let Some(options) = parse(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    run(cargo().args([
        "build",
        "--quiet",
        "-p",
        "test-apiserver",
        "-p",
        "fake-cloud-controller-manager",
    ]))?;
    let target = target_dir();
    let dir = target.join("sandbox");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kubeconfig = dir.join("kubeconfig");
    let cloud_config = dir.join("cloud.toml");
    std::fs::write(&cloud_config, CLOUD_CONFIG)?;

    let mut processes = Processes::new(&dir);
    let api = processes.start_api_server(
        &target.join("debug/test-apiserver"),
        &kubeconfig,
        options.nodes,
        options.services,
    )?;
    let metrics = processes.start_ccm(
        &target.join("debug/fake-cloud-controller-manager"),
        &kubeconfig,
        &cloud_config,
    )?;
    println!("API server  {api}");
    println!(
        "CCM         /metrics on http://{metrics}/metrics, log in {}",
        dir.join("ccm.log").display()
    );
    println!("kubectl     export KUBECONFIG={}", kubeconfig.display());
    println!();
    if options.check {
        crate::tools::kubectl::ensure()?;
    }

    let start = Instant::now();
    let mut last_line = String::new();
    let mut announced = false;
    loop {
        processes.check_alive()?;
        match Status::read(api, metrics) {
            Ok(status) => {
                let line = status.line();
                if line != last_line {
                    println!("[{:>5.1}s] {line}", start.elapsed().as_secs_f64());
                    last_line = line;
                }
                if status.complete() && !announced {
                    announced = true;
                    println!(
                        "\nall nodes initialized, all load balancers provisioned, all routes created"
                    );
                    if options.check {
                        let left = options.timeout.saturating_sub(start.elapsed());
                        let ingress = kubectl::service_gets_ingress(&kubeconfig, left)?;
                        println!("a Service created with kubectl got its ingress: {ingress}");
                        return Ok(());
                    }
                    explain(&kubeconfig);
                }
            }
            Err(err) => println!("[{:>5.1}s] waiting: {err:#}", start.elapsed().as_secs_f64()),
        }
        if options.check && start.elapsed() > options.timeout {
            bail!("not complete after {:?}: {last_line}", options.timeout);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn explain(kubeconfig: &Path) {
    println!(
        "\nKeep going with kubectl (Ctrl-C stops the sandbox):\n\n    export KUBECONFIG={}\n    kubectl get nodes -o wide\n    kubectl apply --validate=false -f - <<'EOF'\n    apiVersion: v1\n    kind: Service\n    metadata: {{name: web, namespace: default}}\n    spec: {{type: LoadBalancer, ports: [{{port: 80, targetPort: 8080}}]}}\n    EOF\n    kubectl get service web -w\n",
        kubeconfig.display()
    );
}
