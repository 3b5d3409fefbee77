//! The existing files a new provider is added to: the workspace's
//! dependency table, the chart's provider enum and ARCHITECTURE.md's code
//! map. Each edit is textual, so the files keep their layout and comments.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;

use super::Refused;
use super::render::{self, Capability, Names};

const MANIFEST: &str = "Cargo.toml";
const SCHEMA: &str = "charts/cloud-controller-manager/values.schema.json";
const ARCHITECTURE: &str = "ARCHITECTURE.md";

/// Refuses a provider whose crate, binary or dependency key exists.
pub(crate) fn refuse_existing(root: &Path, names: &Names) -> Result<(), Refused> {
    let name = &names.name;
    for path in [
        format!("providers/{name}"),
        format!("cmd/{name}-cloud-controller-manager"),
    ] {
        if root.join(&path).exists() {
            return Err(Refused(format!("provider `{name}` exists: {path}")));
        }
    }
    let manifest = std::fs::read_to_string(root.join(MANIFEST)).unwrap_or_default();
    if manifest
        .lines()
        .any(|l| l.starts_with(&format!("ccm-provider-{name} =")))
    {
        return Err(Refused(format!(
            "`ccm-provider-{name}` is already a dependency key in {MANIFEST}: pick another name"
        )));
    }
    Ok(())
}

/// Applies every edit; the paths edited.
pub(crate) fn apply(
    root: &Path,
    names: &Names,
    capabilities: &BTreeSet<Capability>,
) -> anyhow::Result<Vec<String>> {
    edit(root, MANIFEST, |text| add_dependency(text, &names.name))?;
    edit(root, SCHEMA, |text| add_to_enum(text, &names.name))?;
    let section = names
        .fill(render::ARCHITECTURE)
        .replace("{{modules}}", &render::modules(capabilities));
    edit(root, ARCHITECTURE, |text| add_section(text, &section))?;
    Ok(vec![MANIFEST.into(), SCHEMA.into(), ARCHITECTURE.into()])
}

fn edit(
    root: &Path,
    path: &str,
    change: impl FnOnce(&str) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    let file = root.join(path);
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {path}"))?;
    let changed = change(&text).with_context(|| format!("editing {path}"))?;
    std::fs::write(&file, changed).with_context(|| format!("writing {path}"))
}

/// The workspace dependency `ccm-provider-NAME` (the key is the package's
/// name: tidy's naming rule), after the last `ccm-provider-` line.
fn add_dependency(text: &str, name: &str) -> anyhow::Result<String> {
    let line = format!("ccm-provider-{name} = {{ path = \"providers/{name}\" }}\n");
    let mut offset = None;
    let mut at = 0;
    for l in text.split_inclusive('\n') {
        at += l.len();
        if l.starts_with("ccm-provider-") {
            offset = Some(at);
        }
    }
    let offset = offset.context("no `ccm-provider-*` workspace dependency to add it after")?;
    Ok(format!("{}{line}{}", &text[..offset], &text[offset..]))
}

/// `name` added to the `"provider"` property's `"enum"`, in order.
fn add_to_enum(text: &str, name: &str) -> anyhow::Result<String> {
    let property = text
        .find("\"provider\": {")
        .context("no \"provider\" property")?;
    let open = property
        + text[property..]
            .find("\"enum\": [")
            .context("the provider property has no enum")?
        + "\"enum\": [".len();
    let close = open + text[open..].find(']').context("an unclosed enum")?;
    let entries: Vec<&str> = text[open..close]
        .split(',')
        .map(|e| e.trim().trim_matches('"'))
        .filter(|e| !e.is_empty())
        .collect();
    let indent = text[open..close]
        .lines()
        .nth(1)
        .map(|l| l.len() - l.trim_start().len())
        .unwrap_or(8);
    let closing_indent = indent.saturating_sub(2);
    let mut all: BTreeSet<&str> = entries.into_iter().collect();
    all.insert(name);
    let body: Vec<String> = all
        .iter()
        .map(|e| format!("{}\"{e}\"", " ".repeat(indent)))
        .collect();
    Ok(format!(
        "{}\n{}\n{}{}",
        &text[..open],
        body.join(",\n"),
        " ".repeat(closing_indent),
        &text[close..]
    ))
}

/// `section` inserted before the code map's `cmd/` section.
fn add_section(text: &str, section: &str) -> anyhow::Result<String> {
    let at = text
        .find("### `cmd/")
        .context("no `### `cmd/...`` section to add the provider's before")?;
    Ok(format!("{}{section}{}", &text[..at], &text[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dependency_goes_after_the_last_provider() {
        let text = "[x]\nccm-provider-a = 1\nccm-provider-b = 2\n\n[lints]\n";
        let out = add_dependency(text, "acme").unwrap();
        assert_eq!(
            out,
            "[x]\nccm-provider-a = 1\nccm-provider-b = 2\nccm-provider-acme = { path = \"providers/acme\" }\n\n[lints]\n"
        );
    }

    #[test]
    fn the_enum_gains_the_name_in_order_and_stays_json() {
        let text = "{\n  \"properties\": {\n    \"provider\": {\n      \"enum\": [\n        \"aws\",\n        \"fake\"\n      ]\n    }\n  }\n}\n";
        let out = add_to_enum(text, "digitalocean").unwrap();
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value["properties"]["provider"]["enum"],
            serde_json::json!(["aws", "digitalocean", "fake"])
        );
        assert!(out.contains("\n        \"digitalocean\",\n"), "{out}");
    }

    #[test]
    fn the_section_goes_before_the_binaries() {
        let out = add_section(
            "## Code map\n### `providers/x`\n### `cmd/*`\n",
            "### `providers/acme`\n",
        )
        .unwrap();
        assert_eq!(
            out,
            "## Code map\n### `providers/x`\n### `providers/acme`\n### `cmd/*`\n"
        );
    }

    #[test]
    fn an_existing_provider_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("providers/acme")).unwrap();
        let err = refuse_existing(dir.path(), &Names::new("acme").unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "provider `acme` exists: providers/acme");
        std::fs::write(
            dir.path().join(MANIFEST),
            "ccm-provider-beta = { path = \"x\" }\n",
        )
        .unwrap();
        let err = refuse_existing(dir.path(), &Names::new("beta").unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("already a dependency key"),
            "{err}"
        );
    }
}
