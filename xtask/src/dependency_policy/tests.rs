//! The policy read from the repository's `deny.toml` and from variations of
//! it, held against hand-made packages and a `cargo metadata` document.

use super::*;

fn policy() -> Policy {
    let text = std::fs::read_to_string(repo_root().join("deny.toml")).expect("deny.toml");
    Policy::parse(&text).expect("the repository's deny.toml is a policy this check reads")
}

fn registry_crate(name: &str, license: Option<&str>) -> Package {
    Package {
        name: name.to_owned(),
        version: "1.0.0".to_owned(),
        license: license.map(str::to_owned),
        source: Some("registry+https://github.com/rust-lang/crates.io-index".to_owned()),
        workspace: false,
        wildcards: Vec::new(),
    }
}

#[test]
fn the_repositorys_policy_names_the_image_platforms_and_bans_openssl() {
    let policy = policy();
    assert!(policy.all_features);
    assert!(
        policy
            .targets
            .contains(&"aarch64-unknown-linux-musl".to_owned())
    );
    assert!(policy.banned.iter().any(|(name, _)| name == "openssl-sys"));
    assert!(policy.deny_wildcards && policy.allow_wildcard_paths);
}

#[test]
fn licenses_are_read_as_spdx_expressions_lax_and_each_alternative_weighed() {
    let policy = policy();
    for allowed in [
        "MIT",
        "MIT/Apache-2.0",
        "Apache-2.0 / MIT",
        "GPL-3.0 OR MIT",
        "ISC AND (Apache-2.0 OR ISC)",
        "Apache-2.0 WITH LLVM-exception",
        "(MIT OR Apache-2.0) AND Unicode-3.0",
    ] {
        let findings = policy.findings(&[registry_crate("ok", Some(allowed))]);
        assert_eq!(findings, Vec::<String>::new(), "{allowed}");
    }
    for (refused, why) in [
        ("GPL-3.0", "is not allowed"),
        ("MIT AND GPL-3.0", "is not allowed"),
        ("Apache-2.0 WITH Classpath-exception-2.0", "is not allowed"),
        ("MIT OR", "is not an SPDX expression"),
        ("Not-A-License", "is not an SPDX expression"),
    ] {
        let findings = policy.findings(&[registry_crate("bad", Some(refused))]);
        assert_eq!(findings.len(), 1, "{refused}: {findings:?}");
        assert!(
            findings[0].starts_with("bad 1.0.0: license"),
            "{findings:?}"
        );
        assert!(findings[0].contains(why), "{refused}: {findings:?}");
    }
    let unlicensed = policy.findings(&[registry_crate("bare", None)]);
    assert_eq!(
        unlicensed,
        ["bare 1.0.0: no SPDX `license` in its manifest"]
    );
}

#[test]
fn banned_crates_wildcards_and_unknown_sources_are_each_found() {
    let policy = policy();
    let mut wild = registry_crate("wild", Some("MIT"));
    wild.wildcards = vec![("serde".to_owned(), false), ("sibling".to_owned(), true)];
    let mut git = registry_crate("from-git", Some("MIT"));
    git.source = Some("git+https://example.com/x.git#abc".to_owned());
    let mut other = registry_crate("elsewhere", Some("MIT"));
    other.source = Some("registry+https://example.com/index".to_owned());
    let member = Package {
        source: None,
        workspace: true,
        license: None,
        wildcards: vec![("ccm-app".to_owned(), true)],
        ..registry_crate("ccm-x", None)
    };
    let findings = policy.findings(&[
        registry_crate("openssl-sys", Some("MIT")),
        wild,
        git,
        other,
        member,
    ]);
    assert_eq!(
        findings,
        [
            "openssl-sys 1.0.0: banned (rustls only)",
            "wild 1.0.0: requires `serde` as `*`",
            "from-git 1.0.0: from git+https://example.com/x.git#abc, not an allowed registry",
            "elsewhere 1.0.0: from registry+https://example.com/index, not an allowed registry",
        ]
    );
}

#[test]
fn a_key_the_check_does_not_read_is_refused_so_nothing_is_silently_unchecked() {
    let text = std::fs::read_to_string(repo_root().join("deny.toml")).expect("deny.toml");
    for (extra, named) in [
        ("[advisories]\nignore = []\n", "`advisories`"),
        ("[licenses.exceptions]\n", "is not a key"),
    ] {
        let e = Policy::parse(&format!("{text}\n{extra}")).unwrap_err();
        assert!(format!("{e:#}").contains(named), "{extra}: {e:#}");
    }
    let lenient = text.replace("unknown-git = \"deny\"", "unknown-git = \"warn\"");
    assert_ne!(lenient, text);
    let e = Policy::parse(&lenient).unwrap_err();
    assert!(format!("{e:#}").contains("sources.unknown-git"), "{e:#}");
    let duplicates = text.replace(
        "multiple-versions = \"allow\"",
        "multiple-versions = \"deny\"",
    );
    assert_ne!(duplicates, text);
    assert!(Policy::parse(&duplicates).is_err());
}

#[test]
fn cargo_metadata_is_read_into_packages() {
    let json = serde_json::json!({
        "workspace_members": ["path+file:///w/crates/app#ccm-app@0.1.0"],
        "packages": [
            {
                "id": "path+file:///w/crates/app#ccm-app@0.1.0",
                "name": "ccm-app", "version": "0.1.0", "license": null, "source": null,
                "dependencies": [
                    { "name": "ccm-runtime", "req": "*", "path": "/w/crates/runtime" },
                    { "name": "serde", "req": "^1" }
                ]
            },
            {
                "id": "registry+https://github.com/rust-lang/crates.io-index#serde@1.0.0",
                "name": "serde", "version": "1.0.0", "license": "MIT OR Apache-2.0",
                "source": "registry+https://github.com/rust-lang/crates.io-index",
                "dependencies": []
            }
        ]
    });
    let packages = packages(&json).expect("packages");
    assert_eq!(packages.len(), 2);
    assert!(packages[0].workspace && packages[0].license.is_none());
    assert_eq!(packages[0].wildcards, [("ccm-runtime".to_owned(), true)]);
    assert!(!packages[1].workspace);
    assert_eq!(packages[1].license.as_deref(), Some("MIT OR Apache-2.0"));
    assert_eq!(policy().findings(&packages), Vec::<String>::new());
}
