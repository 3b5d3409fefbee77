//! `--only rancher` and `--only budgets`: cloud API calls per operation,
//! ours against upstream's. Each provider has a test that drives its cloud
//! (the Cattle emulator; moto behind the counting proxy; the fake
//! DigitalOcean API), counts the requests and prints a table whose
//! upstream column is derived from upstream's code; this runs the tests,
//! writes the tables to `out/<page>`, and to docs/benchmarks/ with
//! `publish`.

use std::path::Path;

use anyhow::Context;

use crate::cmd::cargo;
use crate::timestamp;

/// One provider's call-count test.
struct Suite {
    /// The heading of its table.
    title: &'static str,
    package: &'static str,
    /// The integration test target.
    test: &'static str,
    /// Its module that holds the call-count test, when the target holds
    /// others too.
    module: Option<&'static str>,
    /// What the table measures and how upstream's column is known.
    about: &'static str,
}

/// One page of the report: its file and the suites it holds.
pub(super) struct Page {
    pub(super) file: &'static str,
    heading: &'static str,
    pub(super) command: &'static str,
    suites: &'static [Suite],
    /// Environment for the tests.
    env: &'static [(&'static str, &'static str)],
    /// Installs what the tests run against, when missing.
    tools: fn() -> anyhow::Result<()>,
}

impl Page {
    /// Installs what the page's tests run against, when missing. A full
    /// run calls it before its first scenario, so a missing tool fails in
    /// seconds rather than after two hours of scenarios; `--only <page>`,
    /// before its tests.
    pub(super) fn prepare(&self) -> anyhow::Result<()> {
        (self.tools)()
    }
}

/// The Rancher suite's Cattle emulator runs inside the test.
fn nothing_to_install() -> anyhow::Result<()> {
    Ok(())
}

pub(super) const RANCHER: Page = Page {
    file: "rancher.md",
    heading: "Rancher API calls per operation",
    command: "cargo xtask bench --only rancher",
    suites: &[Suite {
        title: "",
        package: "ccm-provider-rancher",
        test: "integration",
        module: Some("call_counts"),
        about: "The provider against the Cattle emulator over HTTP, each request counted. Upstream's column is what `rancher/rancher.go` sends for the same work, counted from its code with every wait answered at its first poll (the least it can send). The Service has one port; three nodes, then four.",
    }],
    env: &[],
    tools: nothing_to_install,
};

/// The steady state's window: upstream's 5 minutes, which hold one pass
/// of its node-status loop at the default frequency.
const STEADY_SECONDS: &str = "300";

pub(super) const BUDGETS: Page = Page {
    file: "call-budgets.md",
    heading: "Cloud API calls per operation: AWS and DigitalOcean, ours against upstream's",
    command: "cargo xtask bench --only budgets",
    suites: &[
        Suite {
            title: "AWS",
            package: "aws-cloud-controller-manager",
            test: "integration",
            module: Some("call_budgets"),
            about: "The `aws-cloud-controller-manager` process against the test API server and moto, every AWS request counted at a proxy by API and action, from the start of the work until the CCM has done it and sent nothing for 3 s. 100 nodes register as kubelets do (no `spec.providerID`, Ready); Services have one port; routes are off, as in upstream's example manifests. Upstream's column is what cloud-provider-aws v1.33.4 sends for the same work, derived from its code (the functions are named; `upstream-call-budgets.md` has the whole derivation), the least it can send where that depends on how events coalesce.",
        },
        Suite {
            title: "DigitalOcean",
            package: "digitalocean-cloud-controller-manager",
            test: "integration",
            module: Some("call_budgets"),
            about: "The `digitalocean-cloud-controller-manager` process against the test API server and the fake DigitalOcean API behind Prism, every request counted by method and path. 100 nodes register as kubelets do; the Service has one port; a new load balancer answers `new` until the first read after its create. Upstream's column is what digitalocean-cloud-controller-manager v0.1.63 sends for the same work, derived from its code, the least it can send.",
        },
    ],
    env: &[("CALL_BUDGET_STEADY_SECONDS", STEADY_SECONDS)],
    // moto for AWS, Prism for DigitalOcean, helm for the chart's RBAC.
    tools: crate::tools::ensure_e2e,
};

/// Runs `page`'s suites and writes the page.
/// Its tools must be installed: see [`Page::prepare`].
pub(super) fn run(page: &Page, out: &Path, commit: &str, publish: bool) -> anyhow::Result<()> {
    let mut text = format!(
        "# {}\n\nMeasured by `{}` at {} (commit {commit}).\n",
        page.heading,
        page.command,
        timestamp::now(),
    );
    for suite in page.suites {
        let table = suite_table(page, suite)?;
        if !suite.title.is_empty() {
            text.push_str(&format!("\n## {}\n", suite.title));
        }
        text.push_str(&format!("\n{}\n\n{}\n", suite.about, table.join("\n")));
    }
    std::fs::create_dir_all(out)?;
    let path = out.join(page.file);
    std::fs::write(&path, &text)?;
    println!("{text}\nreport: {}", path.display());
    if publish {
        super::output::publish(std::slice::from_ref(&path))?;
    }
    Ok(())
}

/// Runs one suite and answers the lines of the table it printed.
fn suite_table(page: &Page, suite: &Suite) -> anyhow::Result<Vec<String>> {
    let mut test = cargo();
    test.args([
        "test",
        "--quiet",
        "-p",
        suite.package,
        "--test",
        suite.test,
        "--",
        "--nocapture",
    ]);
    if let Some(module) = suite.module {
        test.arg(format!("{module}::"));
    }
    for (key, value) in page.env {
        test.env(key, value);
    }
    let output = test
        .output()
        .with_context(|| format!("running {}'s {}", suite.package, suite.test))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "{}'s {} failed:\n{stdout}\n{}",
        suite.package,
        suite.test,
        String::from_utf8_lossy(&output.stderr)
    );
    let table: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(
        table.len() > 2,
        "{}'s {} printed no table:\n{stdout}",
        suite.package,
        suite.test
    );
    Ok(table)
}
