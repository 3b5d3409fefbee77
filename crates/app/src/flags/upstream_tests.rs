//! Every flag upstream's `cloud-controller-manager` accepts, from the
//! generated `upstream-flags.json`, is accepted here with its default value,
//! every feature gate at each value its release takes, and `--help` lists
//! the flags in upstream's sections.

use super::upstream::{Flag, upstream};
use super::{Command, help, parse};

/// A value for `flag` as pflag would print its default, in the syntax the
/// flag takes on a command line.
fn sample(flag: &Flag) -> String {
    let default = flag.default_value.as_str();
    match flag.kind.as_str() {
        // pflag prints slices as `[a,b]`.
        "stringSlice" | "int32Slice" => default
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        _ => default.to_owned(),
    }
}

#[test]
fn the_generated_data_covers_upstreams_sections() {
    let data = upstream();
    assert!(!data.releases.is_empty());
    for release in &data.releases {
        let names: Vec<&str> = release.sections.iter().map(|s| s.name.as_str()).collect();
        for expected in ["generic", "secure serving", "authentication", "global"] {
            assert!(names.contains(&expected), "{}: {names:?}", release.source);
        }
        let flags = release
            .sections
            .iter()
            .map(|s| s.flags.len())
            .sum::<usize>();
        assert!(flags > 60, "{}: only {flags} flags", release.source);
        assert!(release.feature_gates.len() > 10, "{}", release.source);
    }
}

#[test]
fn every_upstream_flag_is_accepted_with_its_default() {
    let mut refused = Vec::new();
    let mut checked = 0;
    for release in &upstream().releases {
        for flag in release.sections.iter().flat_map(|s| &s.flags) {
            let arg = format!("--{}={}", flag.name, sample(flag));
            let argv = ["fake-cloud-controller-manager".to_owned(), arg.clone()];
            let parsed = parse("fake", argv);
            // pflag cannot take a certificate list's empty default as a value
            // either; the flag must still be known, with upstream's syntax.
            if flag.kind == "namedCertKey" {
                let err = parsed.expect_err("an empty certificate list is refused, as pflag does");
                assert!(
                    err.contains("expected comma-separated certificate and key"),
                    "{err}"
                );
                checked += 1;
                continue;
            }
            match parsed {
                Ok(Command::Run(_)) => {}
                Ok(other) => refused.push(format!("{arg}: {other:?}")),
                Err(err) => refused.push(format!("{arg} ({}): {err}", release.source)),
            }
            checked += 1;
        }
    }
    assert!(checked > 60);
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}

#[test]
fn every_upstream_feature_gate_is_accepted_at_each_value_its_release_takes() {
    let mut refused = Vec::new();
    for release in &upstream().releases {
        for gate in &release.feature_gates {
            let values = if gate.lock_to_default {
                vec![gate.enabled_by_default]
            } else {
                vec![true, false]
            };
            for value in values {
                let arg = format!("--feature-gates={}={value}", gate.name);
                let argv = ["fake-cloud-controller-manager".to_owned(), arg.clone()];
                match parse("fake", argv) {
                    Ok(Command::Run(_)) => {}
                    Ok(other) => refused.push(format!("{arg}: {other:?}")),
                    Err(err) => refused.push(format!("{arg} ({}): {err}", release.source)),
                }
            }
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}

#[test]
fn help_lists_every_visible_flag_under_upstreams_section_names() {
    let text = help();
    for release in &upstream().releases {
        let mut last_heading = 0;
        for section in &release.sections {
            let heading = section_heading(&section.name);
            let at = text
                .find(&format!("{heading}:"))
                .unwrap_or_else(|| panic!("no `{heading}:` section in --help"));
            assert!(at >= last_heading, "`{heading}` is out of upstream's order");
            last_heading = at;
            for flag in section.flags.iter().filter(|f| !f.hidden) {
                assert!(
                    text.contains(&format!("--{}", flag.name)),
                    "--help lacks --{}",
                    flag.name
                );
            }
        }
    }
}

/// cliflag's `PrintSections` heading: the name with a capital first letter.
fn section_heading(name: &str) -> String {
    let mut chars = name.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or(' ');
    format!("{first}{} flags", chars.as_str())
}

#[test]
fn every_deprecated_upstream_flag_logs_upstreams_notice() {
    for release in &upstream().releases {
        for flag in release.sections.iter().flat_map(|s| &s.flags) {
            let Some(text) = flag.deprecated.as_deref() else {
                continue;
            };
            let arg = format!("--{}={}", flag.name, sample(flag));
            let argv = ["fake-cloud-controller-manager".to_owned(), arg.clone()];
            let Ok(Command::Run(settings)) = parse("fake", argv) else {
                panic!("{arg} is refused");
            };
            let notice = format!("Flag --{} has been deprecated, {text}", flag.name);
            assert!(
                settings.notes.contains(&notice),
                "{arg}: no `{notice}` in {:?}",
                settings.notes
            );
        }
    }
}
