//! What `--version` prints: the version, the git commit, the build date and
//! the compiler, as upstream's CCMs print theirs (`version.Info`).
//!
//! The commit and the build date come from the environment of the build:
//! `cargo xtask image` sets `CCM_GIT_COMMIT` (the checkout's `HEAD`) and
//! `CCM_BUILD_DATE` (`SOURCE_DATE_EPOCH`, else the commit's time, so two
//! builds of one commit are byte-identical). A plain `cargo build` has
//! neither and says `unknown`, as upstream's binaries built without their
//! linker flags do. The compiler's version comes from the build script.

use serde_json::json;

/// One build's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BuildInfo {
    /// The workspace's version, also the chart's `appVersion` and the image
    /// tag.
    pub(crate) version: &'static str,
    /// The git commit built, when the build was told.
    pub(crate) commit: Option<&'static str>,
    /// When it was built (RFC 3339), when the build was told.
    pub(crate) date: Option<&'static str>,
    /// `rustc --version` of the compiler.
    pub(crate) rustc: &'static str,
}

/// An environment value of the build that is set and not blank.
const fn given(value: Option<&'static str>) -> Option<&'static str> {
    match value {
        Some(v) if !v.is_empty() => Some(v),
        _ => None,
    }
}

/// This binary's.
pub(crate) const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    commit: given(option_env!("CCM_GIT_COMMIT")),
    date: given(option_env!("CCM_BUILD_DATE")),
    rustc: env!("CCM_RUSTC_VERSION"),
};

impl BuildInfo {
    /// `--version`: one line.
    pub(crate) fn line(&self, program: &str, provider: &str) -> String {
        format!(
            "{program} {} (provider {provider}; commit {}; built {}; {})",
            self.version,
            self.commit.unwrap_or("unknown"),
            self.date.unwrap_or("unknown"),
            self.rustc
        )
    }

    /// `--version=raw`: one JSON object, with upstream's `version.Info`
    /// field names where they apply.
    pub(crate) fn raw(&self, program: &str, provider: &str) -> String {
        json!({
            "program": program,
            "provider": provider,
            "version": self.version,
            "gitVersion": format!("v{}", self.version),
            "gitCommit": self.commit.unwrap_or(""),
            "buildDate": self.date.unwrap_or(""),
            "rustcVersion": self.rustc,
            "compiler": "rustc",
            "platform": format!("{}/{}", std::env::consts::OS, platform_arch()),
        })
        .to_string()
    }
}

/// The architecture as Kubernetes names it (`amd64`, `arm64`).
fn platform_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOLD: BuildInfo = BuildInfo {
        version: "1.2.3",
        commit: Some("0123abc"),
        date: Some("2026-11-28T16:02:31Z"),
        rustc: "rustc 1.95.0 (0000000 2026-01-01)",
    };

    #[test]
    fn the_line_names_version_commit_date_and_compiler() {
        assert_eq!(
            TOLD.line("aws-cloud-controller-manager", "aws"),
            "aws-cloud-controller-manager 1.2.3 (provider aws; commit 0123abc; built 2026-11-28T16:02:31Z; rustc 1.95.0 (0000000 2026-01-01))"
        );
        let untold = BuildInfo {
            commit: None,
            date: None,
            ..TOLD
        };
        assert_eq!(
            untold.line("x", "fake"),
            "x 1.2.3 (provider fake; commit unknown; built unknown; rustc 1.95.0 (0000000 2026-01-01))"
        );
    }

    #[test]
    fn raw_uses_upstreams_field_names() {
        let raw: serde_json::Value = serde_json::from_str(&TOLD.raw("x", "aws")).expect("JSON");
        assert_eq!(raw["gitVersion"], "v1.2.3");
        assert_eq!(raw["gitCommit"], "0123abc");
        assert_eq!(raw["buildDate"], "2026-11-28T16:02:31Z");
        assert_eq!(raw["compiler"], "rustc");
        assert_eq!(raw["provider"], "aws");
        assert!(
            raw["platform"]
                .as_str()
                .is_some_and(|p| p.starts_with("linux/"))
        );
    }

    #[test]
    fn this_build_knows_its_compiler_and_blank_values_are_unknown() {
        assert!(BUILD.rustc.starts_with("rustc "), "{}", BUILD.rustc);
        assert_eq!(BUILD.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(given(Some("")), None);
        assert_eq!(given(Some("x")), Some("x"));
    }
}
