//! Every flag and feature gate upstream's `aws-cloud-controller-manager`
//! accepts, for each cloud-provider-aws release in `upstream-flags.json`
//! beside this file (generated from upstream's Go source by `cargo xtask
//! upstream-flags`: k8s.io/cloud-provider's command plus the tagging
//! controller's section), is accepted by this binary's parser, and its
//! `--help` lists every visible one under upstream's section names.

use std::process::Command;

use ccm_app::fuzzing::check_flags;
use ccm_provider_aws::AwsProviderFactory;
use serde_json::Value;

/// The generated data.
const DATA: &str = include_str!("../upstream-flags.json");

const BINARY: &str = env!("CARGO_BIN_EXE_aws-cloud-controller-manager");

/// The covered releases, oldest first.
fn releases() -> anyhow::Result<Vec<Value>> {
    let data: Value = serde_json::from_str(DATA)?;
    data["releases"]
        .as_array()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("upstream-flags.json has no releases"))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

fn sections(release: &Value) -> &[Value] {
    release["sections"].as_array().map_or(&[], Vec::as_slice)
}

fn flags(section: &Value) -> &[Value] {
    section["flags"].as_array().map_or(&[], Vec::as_slice)
}

fn gates(release: &Value) -> &[Value] {
    release["feature_gates"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// `argv` parsed and validated as this binary does.
fn check(argv: &[String]) -> Result<(), String> {
    let program = std::iter::once("aws-cloud-controller-manager".to_owned());
    check_flags::<AwsProviderFactory>(program.chain(argv.iter().cloned()).collect())
}

/// A value for `flag` as pflag prints its default, in the syntax the flag
/// takes on a command line.
fn sample(flag: &Value) -> String {
    let default = text(flag, "default");
    match text(flag, "type") {
        // pflag prints slices, arrays and maps as `[a,b]`.
        "stringSlice" | "int32Slice" | "stringArray" | "stringToString" => default
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        _ => default.to_owned(),
    }
}

#[test]
fn the_generated_data_covers_each_aws_release_with_its_tagging_section() -> anyhow::Result<()> {
    let releases = releases()?;
    assert!(releases.len() >= 3, "one release per supported minor");
    for release in &releases {
        let source = text(release, "source");
        assert!(
            source.starts_with("k8s.io/cloud-provider-aws v1."),
            "{source}"
        );
        assert!(
            text(release, "cloud_provider").starts_with("k8s.io/cloud-provider v0."),
            "{source}: which k8s.io/cloud-provider it builds with"
        );
        let names: Vec<&str> = sections(release).iter().map(|s| text(s, "name")).collect();
        for expected in ["generic", "secure serving", "global", "tagging controller"] {
            assert!(names.contains(&expected), "{source}: {names:?}");
        }
        let count: usize = sections(release).iter().map(|s| flags(s).len()).sum();
        assert!(count > 60, "{source}: only {count} flags");
        assert!(gates(release).len() > 10, "{source}");
    }
    Ok(())
}

#[test]
fn every_upstream_aws_flag_is_accepted_with_its_default() -> anyhow::Result<()> {
    let mut refused = Vec::new();
    let mut checked = 0;
    for release in &releases()? {
        let source = text(release, "source");
        for flag in sections(release).iter().flat_map(flags) {
            let arg = format!("--{}={}", text(flag, "name"), sample(flag));
            let parsed = check(std::slice::from_ref(&arg));
            checked += 1;
            // pflag cannot take a certificate list's empty default as a
            // value either; the flag must still be known.
            if text(flag, "type") == "namedCertKey" {
                match parsed {
                    Err(err) if err.contains("expected comma-separated certificate and key") => {}
                    other => refused.push(format!("{arg} ({source}): {other:?}")),
                }
                continue;
            }
            if let Err(err) = parsed {
                refused.push(format!("{arg} ({source}): {err}"));
            }
        }
    }
    assert!(checked > 180, "only {checked} flags checked");
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    Ok(())
}

#[test]
fn every_upstream_aws_feature_gate_is_accepted() -> anyhow::Result<()> {
    let mut refused = Vec::new();
    for release in &releases()? {
        let source = text(release, "source");
        for gate in gates(release) {
            let name = text(gate, "name");
            let default = gate["default"].as_bool().unwrap_or(false);
            let locked = gate["lock_to_default"].as_bool().unwrap_or(false);
            // A locked gate takes only its default; any other both ways.
            let values = if locked {
                vec![default]
            } else {
                vec![default, !default]
            };
            for value in values {
                let arg = format!("--feature-gates={name}={value}");
                if let Err(err) = check(std::slice::from_ref(&arg)) {
                    refused.push(format!("{arg} ({source}): {err}"));
                }
            }
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
    Ok(())
}

#[test]
fn help_lists_every_visible_upstream_aws_flag_under_its_section() -> anyhow::Result<()> {
    let output = Command::new(BINARY).arg("--help").output()?;
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8(output.stdout)?;
    for release in &releases()? {
        let source = text(release, "source");
        let mut last_heading = 0;
        for section in sections(release) {
            let heading = section_heading(text(section, "name"));
            let at = help
                .find(&format!("{heading}:"))
                .unwrap_or_else(|| panic!("{source}: no `{heading}:` section in --help"));
            assert!(at >= last_heading, "`{heading}` is out of upstream's order");
            last_heading = at;
            for flag in flags(section) {
                let name = text(flag, "name");
                if flag["hidden"].as_bool() != Some(true) {
                    assert!(help.contains(&format!("--{name}")), "--help lacks --{name}");
                }
            }
        }
    }
    Ok(())
}

/// cliflag's `PrintSections` heading: the name with a capital first letter.
fn section_heading(name: &str) -> String {
    let mut chars = name.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or(' ');
    format!("{first}{} flags", chars.as_str())
}
