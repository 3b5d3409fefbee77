//! The dependency graph's policy, `deny.toml`: every crate's license, the
//! banned crates, wildcard version requirements and where crates come
//! from, checked against `cargo metadata`.
//!
//! `deny.toml` is cargo-deny's format, so `cargo deny check` reads the same
//! file where cargo-deny is installed (and `cargo deny check advisories`
//! where GitHub is reachable: the RustSec database is a git repository, out
//! of reach of CI's network). CI checks it here instead: cargo-deny took
//! about eight minutes to compile on a fresh 2-core machine, and the four
//! checks CI runs are a few lines over the graph cargo already resolves.
//! License expressions are read by the `spdx` crate, as cargo-deny reads
//! them (lax: `MIT/Apache-2.0` is `MIT OR Apache-2.0`).
//!
//! The check reads only the keys below and refuses any other, so the file
//! cannot say something that is not checked:
//! - `graph.targets`, `graph.all-features`: the graph `cargo metadata`
//!   resolves (`--filter-platform` for each target).
//! - `licenses.allow`: each crate's `license` must be satisfiable by these.
//!   A crate without an SPDX `license` fails (cargo-deny would guess from
//!   the license file's text; `licenses.confidence-threshold` is accepted
//!   for cargo-deny's sake and means nothing here).
//! - `licenses.private.ignore = true`: the workspace's own crates are not
//!   published and have no license to check.
//! - `bans.deny`: `{ crate, reason }`, crates that must not be in the graph.
//! - `bans.wildcards = "deny"`: no `*` requirement, except on a path
//!   dependency with `bans.allow-wildcard-paths = true`.
//! - `bans.multiple-versions = "allow"`.
//! - `sources`: `unknown-registry` and `unknown-git` both `"deny"`: a crate
//!   comes from the workspace or one of `allow-registry`.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use spdx::{Expression, Licensee, ParseMode};

use crate::cmd::{cargo, repo_root, stdout};

/// What `deny.toml` asks.
#[derive(Debug)]
pub(crate) struct Policy {
    targets: Vec<String>,
    all_features: bool,
    allow: Vec<Licensee>,
    banned: Vec<(String, String)>,
    deny_wildcards: bool,
    allow_wildcard_paths: bool,
    registries: BTreeSet<String>,
}

/// A crate of the graph, as the policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Package {
    pub(crate) name: String,
    pub(crate) version: String,
    /// The manifest's `license`, an SPDX expression.
    pub(crate) license: Option<String>,
    /// `None` for the workspace's crates (path dependencies).
    pub(crate) source: Option<String>,
    pub(crate) workspace: bool,
    /// Its dependencies required as `*`: (name, whether by path).
    pub(crate) wildcards: Vec<(String, bool)>,
}

/// Reads `deny.toml`, resolves the graph it names and checks it.
pub(crate) fn check() -> anyhow::Result<()> {
    let path = repo_root().join("deny.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let policy = Policy::parse(&text).with_context(|| format!("{}", path.display()))?;
    let mut metadata = cargo();
    metadata.args(["metadata", "--format-version", "1", "--locked"]);
    if policy.all_features {
        metadata.arg("--all-features");
    }
    for target in &policy.targets {
        metadata.args(["--filter-platform", target]);
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&mut metadata)?).context("reading `cargo metadata`")?;
    let packages = packages(&json)?;
    let findings = policy.findings(&packages);
    if !findings.is_empty() {
        bail!(
            "the dependency graph breaks deny.toml:\n  {}",
            findings.join("\n  ")
        );
    }
    let external = packages.iter().filter(|p| !p.workspace).count();
    println!(
        "xtask: dependency policy: {external} crates for {} hold deny.toml (licenses, bans, wildcards, sources)",
        policy.targets.join(", ")
    );
    Ok(())
}

/// The graph's packages from `cargo metadata`'s JSON.
pub(crate) fn packages(metadata: &serde_json::Value) -> anyhow::Result<Vec<Package>> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .context("`cargo metadata` has no workspace_members")?
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().map(str::to_owned);
    metadata["packages"]
        .as_array()
        .context("`cargo metadata` has no packages")?
        .iter()
        .map(|p| {
            let name = text(p, "name").context("a package without a name")?;
            let wildcards = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["req"].as_str() == Some("*"))
                .filter_map(|d| Some((text(d, "name")?, d["path"].is_string())))
                .collect();
            Ok(Package {
                version: text(p, "version").unwrap_or_default(),
                license: text(p, "license"),
                source: text(p, "source"),
                workspace: p["id"].as_str().is_some_and(|id| members.contains(id)),
                wildcards,
                name,
            })
        })
        .collect()
}

/// `table[key]` as a table, empty when absent.
fn table(table: &toml::Table, key: &str) -> anyhow::Result<toml::Table> {
    match table.get(key) {
        None => Ok(toml::Table::new()),
        Some(toml::Value::Table(t)) => Ok(t.clone()),
        Some(_) => bail!("`{key}` is not a table"),
    }
}

/// Refuses any key of `table` (named `at`) not in `known`.
fn only(table: &toml::Table, at: &str, known: &[&str]) -> anyhow::Result<()> {
    match table.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => bail!("`{at}{key}` is not a key this check reads (it reads {known:?})"),
        None => Ok(()),
    }
}

fn strings(table: &toml::Table, key: &str) -> anyhow::Result<Vec<String>> {
    match table.get(key) {
        None => Ok(Vec::new()),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("`{key}` holds a non-string"))
            })
            .collect(),
        Some(_) => bail!("`{key}` is not an array"),
    }
}

/// `key`'s string, which must be one of `allowed` (the first when absent).
fn choice<'a>(table: &toml::Table, key: &str, allowed: &[&'a str]) -> anyhow::Result<&'a str> {
    let Some(value) = table.get(key) else {
        return Ok(allowed[0]);
    };
    let value = value.as_str().unwrap_or_default();
    allowed
        .iter()
        .find(|a| **a == value)
        .copied()
        .with_context(|| format!("`{key}` must be one of {allowed:?} here"))
}

fn flag(table: &toml::Table, key: &str) -> anyhow::Result<bool> {
    match table.get(key) {
        None => Ok(false),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(_) => bail!("`{key}` is not a boolean"),
    }
}

impl Policy {
    /// The policy `deny.toml`'s text states.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let root: toml::Table = toml::from_str(text).context("not TOML")?;
        only(&root, "", &["graph", "licenses", "bans", "sources"])?;
        let graph = &table(&root, "graph")?;
        only(graph, "graph.", &["targets", "all-features"])?;
        let licenses = &table(&root, "licenses")?;
        only(
            licenses,
            "licenses.",
            &["allow", "confidence-threshold", "private"],
        )?;
        let private = &table(licenses, "private")?;
        only(private, "licenses.private.", &["ignore"])?;
        if !flag(private, "ignore")? {
            bail!("`licenses.private.ignore` must be true: the workspace's crates are unlicensed");
        }
        let allow = strings(licenses, "allow")?
            .iter()
            .map(|l| {
                Licensee::parse(l).with_context(|| format!("`licenses.allow`: `{l}` is not SPDX"))
            })
            .collect::<anyhow::Result<_>>()?;
        let bans = &table(&root, "bans")?;
        only(
            bans,
            "bans.",
            &[
                "multiple-versions",
                "wildcards",
                "allow-wildcard-paths",
                "deny",
            ],
        )?;
        choice(bans, "multiple-versions", &["allow"])?;
        let deny_wildcards = choice(bans, "wildcards", &["allow", "deny"])? == "deny";
        let banned = match bans.get("deny") {
            None => Vec::new(),
            Some(toml::Value::Array(entries)) => entries
                .iter()
                .map(|e| {
                    let e = e.as_table().context("a `bans.deny` entry is not a table")?;
                    only(e, "bans.deny[].", &["crate", "reason"])?;
                    let name = e.get("crate").and_then(toml::Value::as_str);
                    let reason = e.get("reason").and_then(toml::Value::as_str);
                    Ok((
                        name.context("a `bans.deny` entry names no crate")?
                            .to_owned(),
                        reason.unwrap_or("banned").to_owned(),
                    ))
                })
                .collect::<anyhow::Result<_>>()?,
            Some(_) => bail!("`bans.deny` is not an array"),
        };
        let sources = &table(&root, "sources")?;
        only(
            sources,
            "sources.",
            &["unknown-registry", "unknown-git", "allow-registry"],
        )?;
        for key in ["unknown-registry", "unknown-git"] {
            if sources.get(key).and_then(toml::Value::as_str) != Some("deny") {
                bail!("`sources.{key}` must be \"deny\": this check allows no other source");
            }
        }
        Ok(Self {
            targets: strings(graph, "targets")?,
            all_features: flag(graph, "all-features")?,
            allow,
            banned,
            deny_wildcards,
            allow_wildcard_paths: flag(bans, "allow-wildcard-paths")?,
            registries: strings(sources, "allow-registry")?
                .into_iter()
                .map(|r| format!("registry+{r}"))
                .collect(),
        })
    }

    /// What in `packages` breaks the policy, one line each.
    pub(crate) fn findings(&self, packages: &[Package]) -> Vec<String> {
        let mut found = Vec::new();
        for p in packages {
            let at = format!("{} {}", p.name, p.version);
            if let Some((_, reason)) = self.banned.iter().find(|(name, _)| *name == p.name) {
                found.push(format!("{at}: banned ({reason})"));
            }
            for (dep, by_path) in &p.wildcards {
                if self.deny_wildcards && !(*by_path && self.allow_wildcard_paths) {
                    found.push(format!("{at}: requires `{dep}` as `*`"));
                }
            }
            if p.workspace {
                continue;
            }
            match &p.source {
                Some(source) if self.registries.contains(source) => {}
                Some(source) => found.push(format!("{at}: from {source}, not an allowed registry")),
                None => found.push(format!("{at}: a path crate outside the workspace")),
            }
            if let Some(why) = self.license_finding(p.license.as_deref()) {
                found.push(format!("{at}: {why}"));
            }
        }
        found
    }

    fn license_finding(&self, license: Option<&str>) -> Option<String> {
        let Some(license) = license else {
            return Some("no SPDX `license` in its manifest".to_owned());
        };
        match Expression::parse_mode(license, ParseMode::LAX) {
            Err(e) => Some(format!(
                "license `{license}` is not an SPDX expression: {e}"
            )),
            Ok(expression) => (!expression
                .evaluate(|req| self.allow.iter().any(|l| l.satisfies(req))))
            .then(|| format!("license `{license}` is not allowed by `licenses.allow`")),
        }
    }
}

#[cfg(test)]
mod tests;
