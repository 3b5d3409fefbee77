//! The templates under `xtask/templates/new-provider/`, rendered for one
//! provider: `{{name}}`-style placeholders filled in, and `//@if CAP` ...
//! `//@end` blocks (`#@if` in TOML and YAML, `!CAP` for its absence) kept
//! only when the provider has that capability.

use std::collections::BTreeSet;

use super::Refused;

/// What a generated provider offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Capability {
    /// Instances, looked up in batches.
    Instances,
    /// Load balancers for Services.
    LoadBalancers,
    /// Pod-CIDR routes.
    Routes,
}

impl Capability {
    fn as_str(self) -> &'static str {
        match self {
            Self::Instances => "instances",
            Self::LoadBalancers => "load-balancers",
            Self::Routes => "routes",
        }
    }
}

/// The set of capabilities asked for, refused when empty or when routes
/// come without instances (routes name their target nodes).
pub(crate) fn capabilities(asked: &[Capability]) -> Result<BTreeSet<Capability>, Refused> {
    let set: BTreeSet<Capability> = asked.iter().copied().collect();
    if set.is_empty() {
        return Err(Refused("--capabilities names none".into()));
    }
    if set.contains(&Capability::Routes) && !set.contains(&Capability::Instances) {
        return Err(Refused(
            "--capabilities: routes need instances (add `instances`)".into(),
        ));
    }
    Ok(set)
}

/// A provider's name in each spelling the templates use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    /// `my-cloud`: paths, packages, `--cloud-provider`.
    pub(crate) name: String,
    /// `my_cloud`: the library's name.
    snake: String,
    /// `MyCloud`: types.
    camel: String,
    /// `MY_CLOUD`: environment variables.
    upper: String,
}

/// The longest name accepted: the binary's name stays readable.
const MAX_NAME: usize = 30;

impl Names {
    /// Checks `name`: lower-case ASCII letters and digits in words joined by
    /// single `-`, starting with a letter.
    pub(crate) fn new(name: &str) -> Result<Self, Refused> {
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.split('-').all(|w| {
                !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            });
        if !valid {
            return Err(Refused(format!(
                "`{name}` is not a valid provider name: lower-case letters and digits, words joined by `-`, starting with a letter, at most {MAX_NAME} characters (e.g. `acme` or `acme-cloud`)"
            )));
        }
        let camel = name
            .split('-')
            .map(|w| {
                let mut chars = w.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            })
            .collect();
        Ok(Self {
            name: name.to_owned(),
            snake: name.replace('-', "_"),
            camel,
            upper: name.replace('-', "_").to_ascii_uppercase(),
        })
    }

    /// `text` with every placeholder filled in.
    pub(crate) fn fill(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name)
            .replace("{{snake}}", &self.snake)
            .replace("{{Camel}}", &self.camel)
            .replace("{{UPPER}}", &self.upper)
    }
}

/// Keeps the lines of `text` whose `@if` blocks `capabilities` satisfy,
/// dropping the marker lines themselves.
pub(crate) fn select(text: &str, capabilities: &BTreeSet<Capability>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut keep = true;
    for line in text.split_inclusive('\n') {
        let marker = line
            .trim_start()
            .trim_start_matches("//")
            .trim_start_matches('#');
        if let Some(condition) = marker.strip_prefix("@if ") {
            let condition = condition.trim();
            let (negated, cap) = match condition.strip_prefix('!') {
                Some(cap) => (true, cap),
                None => (false, condition),
            };
            let has = capabilities.iter().any(|c| c.as_str() == cap);
            keep = has != negated;
        } else if marker.trim() == "@end" {
            keep = true;
        } else if keep {
            out.push_str(line);
        }
    }
    out
}

/// One template: where it goes (with `{{name}}` placeholders), its text,
/// and the capability it needs.
struct Template {
    path: &'static str,
    text: &'static str,
    needs: Option<Capability>,
}

macro_rules! template {
    ($path:literal, $file:literal) => {
        template!($path, $file, None)
    };
    ($path:literal, $file:literal, $needs:expr) => {
        Template {
            path: $path,
            text: include_str!(concat!("../../templates/new-provider/", $file)),
            needs: $needs,
        }
    };
}

const TEMPLATES: &[Template] = &[
    template!("providers/{{name}}/Cargo.toml", "provider/Cargo.toml"),
    template!("providers/{{name}}/src/lib.rs", "provider/src/lib.rs"),
    template!("providers/{{name}}/src/api.rs", "provider/src/api.rs"),
    template!("providers/{{name}}/src/config.rs", "provider/src/config.rs"),
    template!(
        "providers/{{name}}/src/factory.rs",
        "provider/src/factory.rs"
    ),
    template!(
        "providers/{{name}}/src/emulator.rs",
        "provider/src/emulator.rs"
    ),
    template!(
        "providers/{{name}}/src/instances.rs",
        "provider/src/instances.rs",
        Some(Capability::Instances)
    ),
    template!(
        "providers/{{name}}/src/load_balancer.rs",
        "provider/src/load_balancer.rs",
        Some(Capability::LoadBalancers)
    ),
    template!(
        "providers/{{name}}/src/routes.rs",
        "provider/src/routes.rs",
        Some(Capability::Routes)
    ),
    template!(
        "providers/{{name}}/tests/conformance.rs",
        "provider/tests/conformance.rs"
    ),
    template!(
        "cmd/{{name}}-cloud-controller-manager/Cargo.toml",
        "cmd/Cargo.toml"
    ),
    template!(
        "cmd/{{name}}-cloud-controller-manager/src/main.rs",
        "cmd/src/main.rs"
    ),
    template!(
        "charts/cloud-controller-manager/ci/{{name}}-values.yaml",
        "ci-values.yaml"
    ),
    template!("docs/providers/{{name}}.md", "provider.md"),
];

/// The code-map section for ARCHITECTURE.md.
pub(crate) const ARCHITECTURE: &str = include_str!("../../templates/new-provider/architecture.md");

/// Every new file: its path relative to the workspace root, and its text.
pub(crate) fn files(names: &Names, capabilities: &BTreeSet<Capability>) -> Vec<(String, String)> {
    let listed: Vec<&str> = capabilities.iter().map(|c| c.as_str()).collect();
    TEMPLATES
        .iter()
        .filter(|t| t.needs.is_none_or(|c| capabilities.contains(&c)))
        .map(|t| {
            let text = select(t.text, capabilities).replace("{{capabilities}}", &listed.join(", "));
            (names.fill(t.path), names.fill(&text))
        })
        .collect()
}

/// The capability modules, for the code map: `` `instances`, `load_balancer` ``.
pub(crate) fn modules(capabilities: &BTreeSet<Capability>) -> String {
    capabilities
        .iter()
        .map(|c| match c {
            Capability::Instances => "`instances` looks nodes' instances up in batches; ",
            Capability::LoadBalancers => {
                "`load_balancer` keeps one load balancer per Service (spec, pure plan, apply); "
            }
            Capability::Routes => "`routes` keeps pod-CIDR routes; ",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spelled_for_each_use() {
        let names = Names::new("acme-cloud2").unwrap();
        assert_eq!(
            names.fill("{{name}} {{snake}} {{Camel}} {{UPPER}}"),
            "acme-cloud2 acme_cloud2 AcmeCloud2 ACME_CLOUD2"
        );
    }

    #[test]
    fn invalid_names_are_refused_with_one_line() {
        for bad in [
            "",
            "Acme",
            "1acme",
            "acme_cloud",
            "acme--x",
            "acme-",
            "-acme",
            "ac me",
            "a".repeat(31).as_str(),
        ] {
            let err = Names::new(bad).unwrap_err().to_string();
            assert!(
                err.contains("not a valid provider name") && !err.contains('\n'),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn blocks_follow_the_capabilities() {
        let text = "a\n//@if routes\nb\n//@end\n#@if !routes\nc\n#@end\nd\n";
        let routes = capabilities(&[Capability::Instances, Capability::Routes]).unwrap();
        assert_eq!(select(text, &routes), "a\nb\nd\n");
        let lbs = capabilities(&[Capability::LoadBalancers]).unwrap();
        assert_eq!(select(text, &lbs), "a\nc\nd\n");
    }

    #[test]
    fn routes_without_instances_or_nothing_at_all_are_refused() {
        assert!(capabilities(&[Capability::Routes]).is_err());
        assert!(capabilities(&[]).is_err());
    }

    #[test]
    fn capability_files_are_left_out_when_not_asked_for() {
        let names = Names::new("acme").unwrap();
        let lbs = capabilities(&[Capability::LoadBalancers]).unwrap();
        let paths: Vec<String> = files(&names, &lbs).into_iter().map(|(p, _)| p).collect();
        assert!(paths.contains(&"providers/acme/src/load_balancer.rs".to_owned()));
        assert!(
            !paths
                .iter()
                .any(|p| p.ends_with("routes.rs") || p.ends_with("instances.rs"))
        );
        for (path, text) in files(&names, &lbs) {
            assert!(
                !text.contains("{{") && !text.contains("@if"),
                "{path} keeps a marker"
            );
        }
    }
}
