//! The audit's command line: its own flags, and the binary's usual flags
//! (`--kubeconfig`, `--cloud-config`, `--cluster-name`, `--cluster-cidr`...)
//! for everything else.

use ccm_cloud_provider::ProviderController;

use crate::flags::{self, Command, Settings};

/// How the audit prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Table,
    Json,
}

/// A parsed `audit` command line.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) output: Output,
    /// `--delete --yes`: remove what was listed.
    pub(crate) delete: bool,
    /// `--force`: delete even while a CCM leads.
    pub(crate) force: bool,
    pub(crate) settings: Settings,
}

/// What `audit` asks for.
#[derive(Debug)]
pub(crate) enum Parsed {
    Run(Box<Options>),
    Help(String),
}

/// The audit's own lines of `audit --help`.
const USAGE: &str = "\
Usage: {program} audit [--output=table|json] [--delete --yes [--force]] [flags]

Lists the cloud resources tagged for this cluster (--cluster-name, or the
cluster ID of the cloud config) that no Service or Node owns any more, and
the Services whose recorded load balancer no longer exists. Changes nothing
unless --delete --yes is given, and then refuses while a CCM holds the
leader-election Lease (--leader-elect-resource-namespace/-name), since a
leader may adopt what the audit listed; each resource is checked against
the cluster again just before it is deleted. Takes the binary's usual
flags (--kubeconfig, --master, --cloud-config, --cluster-name,
--cluster-cidr); routes are audited only inside --cluster-cidr.

Audit flags:
  -o, --output FORMAT   table (the default) or json
      --delete          delete every leaked resource listed (needs --yes)
      --yes             confirm --delete
      --force           with --delete: delete even while a CCM leads
";

/// Parses the arguments after `audit` (the program name first).
pub(crate) fn parse(
    provider: &str,
    extras: &[ProviderController],
    program: &str,
    args: Vec<String>,
) -> Result<Parsed, String> {
    let mut output = Output::Table;
    let (mut delete, mut yes, mut force) = (false, false, false);
    let mut rest = Vec::with_capacity(args.len());
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let format = match arg.as_str() {
            "-o" | "--output" => Some(
                args.next()
                    .ok_or_else(|| format!("audit: {arg} needs a value: table or json"))?,
            ),
            _ => arg
                .strip_prefix("--output=")
                .or_else(|| arg.strip_prefix("-o="))
                .map(str::to_owned),
        };
        if let Some(format) = format {
            output = match format.as_str() {
                "table" => Output::Table,
                "json" => Output::Json,
                other => return Err(format!("audit: --output=`{other}`: expected table or json")),
            };
            continue;
        }
        match arg.as_str() {
            "--delete" => delete = true,
            "--yes" => yes = true,
            "--force" => force = true,
            "-h" | "--help" => return Ok(Parsed::Help(USAGE.replace("{program}", program))),
            _ => rest.push(arg),
        }
    }
    if delete && !yes {
        return Err("audit: --delete removes cloud resources; add --yes to confirm".to_owned());
    }
    if yes && !delete {
        return Err("audit: --yes confirms --delete, which is not given".to_owned());
    }
    if force && !delete {
        return Err("audit: --force applies to --delete, which is not given".to_owned());
    }
    match flags::provider::parse_for(provider, extras, rest)? {
        Command::Run(settings) => Ok(Parsed::Run(Box::new(Options {
            output,
            delete,
            force,
            settings: *settings,
        }))),
        Command::Help(_) | Command::Version { .. } => {
            Ok(Parsed::Help(USAGE.replace("{program}", program)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_audit(args: &[&str]) -> Result<Parsed, String> {
        let args = std::iter::once("ccm")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect();
        parse("fake", &[], "ccm", args)
    }

    #[test]
    fn its_own_flags_and_the_binarys_mix() {
        let Ok(Parsed::Run(o)) =
            parse_audit(&["-o", "json", "--cluster-name=c1", "--delete", "--yes"])
        else {
            panic!("a valid audit command line");
        };
        assert_eq!(o.output, Output::Json);
        assert!(o.delete && !o.force);
        assert_eq!(o.settings.cluster_name, "c1");
        let Ok(Parsed::Run(o)) = parse_audit(&["--output=table"]) else {
            panic!("a valid audit command line");
        };
        assert_eq!((o.output, o.delete), (Output::Table, false));
    }

    #[test]
    fn bad_input_is_one_line_naming_the_flag() {
        for (args, expected) in [
            (&["--delete"][..], "add --yes"),
            (&["--yes"][..], "--yes confirms --delete"),
            (&["--force"][..], "--force applies to --delete"),
            (&["--output=yaml"][..], "--output=`yaml`"),
            (&["-o"][..], "-o needs a value"),
            (&["--no-such-flag"][..], "--no-such-flag"),
        ] {
            let err = parse_audit(args).unwrap_err();
            assert!(err.contains(expected), "{args:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        assert!(
            matches!(parse_audit(&["--help"]), Ok(Parsed::Help(text)) if text.contains("audit"))
        );
    }
}
