//! Project tasks, run as `cargo xtask <task>`.
//!
//! One module per task; `main` only dispatches. Tasks shell out to cargo and
//! the project's binaries rather than linking them, so xtask itself builds in
//! seconds and never forks the workspace's dependency features.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask talks to a terminal"
)]
#![allow(
    clippy::disallowed_methods,
    reason = "xtask is synchronous: a blocking sleep blocks no async worker"
)]

mod bench;
mod chart;
mod ci;
mod cluster;
mod cmd;
mod digest;
mod e2e;
mod http;
mod image;
mod processes;
mod sandbox;
mod tools;

use std::process::ExitCode;

/// A task: its name, a one-line summary, and what runs it.
struct Task {
    name: &'static str,
    summary: &'static str,
    run: fn(&[String]) -> anyhow::Result<()>,
}

const TASKS: &[Task] = &[
    Task {
        name: "sandbox",
        summary: "the CCM against an embedded API server and the fake cloud; kubectl-ready",
        run: sandbox::main,
    },
    Task {
        name: "image",
        summary: "a reproducible OCI image of a provider's static binary, under target/images/",
        run: image::main,
    },
    Task {
        name: "chart",
        summary: "the Helm chart: lint, strict schema validation, RBAC against a real CCM",
        run: chart::main,
    },
    Task {
        name: "e2e",
        summary: "the end-to-end suites; with KUBECONFIG set, also against that real cluster",
        run: e2e::main,
    },
    Task {
        name: "bench",
        summary: "the CCM at scale against the test API server; figures vs upstream's algorithm",
        run: bench::main,
    },
    Task {
        name: "cluster",
        summary: "the real kube-apiserver and etcd on loopback (built from Go modules) until Ctrl-C",
        run: cluster::main,
    },
    Task {
        name: "ci",
        summary: "every check CI runs: installs missing tools, fmt, clippy, docs, all tests",
        run: ci::main,
    },
];

fn usage() -> String {
    let mut out = String::from("usage: cargo xtask <task> [options]\n\ntasks:\n");
    for task in TASKS {
        out.push_str(&format!("  {:<10} {}\n", task.name, task.summary));
    }
    out.push_str("\n`cargo xtask <task> --help` describes a task's options.\n");
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        eprint!("{}", usage());
        return ExitCode::from(64);
    };
    if matches!(name.as_str(), "-h" | "--help" | "help") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some(task) = TASKS.iter().find(|t| t.name == name) else {
        eprintln!("xtask: unknown task `{name}`\n\n{}", usage());
        return ExitCode::from(64);
    };
    match (task.run)(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask {}: {err:#}", task.name);
            ExitCode::FAILURE
        }
    }
}
