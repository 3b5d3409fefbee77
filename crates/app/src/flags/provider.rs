//! The flags and `--controllers` names of the controllers a provider adds
//! ([`ProviderController`]): on the command line of that provider's binary
//! only, with upstream's names, defaults and validation
//! (cloud-provider-aws's `tagging controller` and `nodeipam controller`
//! flag sets).
//!
//! As upstream, a provider controller is off unless `--controllers` names
//! it (`*` does not), and its flags are validated only when it is on.

use std::collections::{BTreeMap, BTreeSet};

use ccm_cloud_provider::{ProviderController, ProviderControllerKind};
use ccm_controllers::{ProviderControllerSettings, QueueRate};
use clap::{ArgAction, ArgMatches, Args, Command, FromArgMatches};
use ipnet::IpNet;

use super::{Command as Parsed, Flags, one_line, parse_bool, validate};

/// The only resource upstream's tagging controller tags.
const INSTANCE: &str = "instance";

/// cloud-provider-aws's "tagging controller" flags.
#[derive(Debug, Clone, Args)]
pub(crate) struct TaggingFlags {
    /// Tags to apply to the cloud resources in the tagging controller, in a form of key=value.
    #[arg(long, value_name = "mapStringString", action = ArgAction::Append)]
    tags: Vec<String>,

    /// The cloud resources to add/remove tags on in the tagging controller (only `instance`).
    #[arg(long, value_name = "stringArray", action = ArgAction::Append)]
    resources: Vec<String>,

    /// Steady-state rate limit (per sec) at which the controller processes items in its queue. A value of zero (default) disables rate limiting.
    #[arg(
        long,
        value_name = "float",
        default_value = "0",
        allow_negative_numbers = true
    )]
    tagging_controller_rate_limit: f64,

    /// Burst limit at which the controller processes items in its queue. A value of zero (default) disables rate limiting.
    #[arg(
        long,
        value_name = "int",
        default_value = "0",
        allow_negative_numbers = true
    )]
    tagging_controller_burst_limit: i64,

    /// The number of workers concurrently synchronizing nodes (here: nodes are tagged in batches).
    #[arg(
        long,
        value_name = "int",
        default_value = "1",
        allow_negative_numbers = true
    )]
    tagging_controller_concurrent_node_syncs: i64,

    /// Enables batching create and delete tag calls (here they always are).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    tagging_controller_enable_batching: bool,
}

/// cloud-provider-aws's "nodeipam controller" flags.
#[derive(Debug, Clone, Args)]
pub(crate) struct NodeIpamFlags {
    /// Steady-state rate limit (per sec) at which the controller processes items in its queue. A value of zero (default) disables rate limiting.
    #[arg(
        long,
        value_name = "float",
        default_value = "0",
        allow_negative_numbers = true
    )]
    nodeipam_controller_rate_limit: f64,

    /// Burst limit at which the controller processes items in its queue. A value of zero (default) disables rate limiting.
    #[arg(
        long,
        value_name = "int",
        default_value = "0",
        allow_negative_numbers = true
    )]
    nodeipam_controller_burst_limit: i64,

    /// IP mode in which the controller runs. Can be either dualstack or IPv6. A value of false (default) enables IPv6 only mode.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    dualstack: bool,

    /// Mask size for node cidr in cluster. Default is 24 for IPv4.
    #[arg(
        long,
        value_name = "int32",
        default_value = "0",
        allow_negative_numbers = true
    )]
    node_cidr_mask_size: i32,
}

/// [`super::parse`] for a provider that adds the controllers `extras`: their names
/// in `--controllers` and their flags are accepted too.
///
/// # Errors
/// One line naming the flag and what is wrong with it.
pub(crate) fn parse_for(
    provider: &str,
    extras: &[ProviderController],
    args: impl IntoIterator<Item = String>,
) -> Result<Parsed, String> {
    use clap::CommandFactory;
    let matches = augment(Flags::command(), extras)
        .try_get_matches_from(args)
        .map_err(|err| one_line(&err))?;
    let mut flags = Flags::from_arg_matches(&matches).map_err(|err| one_line(&err))?;
    if flags.global.help {
        return Ok(Parsed::Help(help_for(provider, extras)));
    }
    match flags.global.version.as_deref() {
        None | Some("false") => {}
        Some("true") => return Ok(Parsed::Version { raw: false }),
        Some("raw") => return Ok(Parsed::Version { raw: true }),
        Some(other) if other.starts_with('v') => {}
        Some(other) => {
            return Err(format!(
                "--version: `{other}` is not true, false, raw or a version such as v1.37.0"
            ));
        }
    }
    let (generic, enabled) = split_controllers(&flags.generic.controllers, extras);
    flags.generic.controllers = generic;
    let mut settings = validate(provider, flags)?;
    settings.provider_controllers =
        provider_settings(&matches, extras, enabled, &settings.cluster_cidrs)?;
    let enabled = settings.provider_controllers.enabled.clone();
    settings.notes.retain(|n| keeps_note(n, &enabled));
    let notes = settings.provider_controllers.notes.clone();
    settings.notes.extend(notes);
    Ok(Parsed::Run(Box::new(settings)))
}

/// `--help` of `provider`'s binary, whose provider adds the controllers
/// `extras`; its usage line names the binary, as upstream's does.
pub(crate) fn help_for(provider: &str, extras: &[ProviderController]) -> String {
    use clap::CommandFactory;
    augment(Flags::command(), extras)
        .bin_name(format!("{provider}-cloud-controller-manager"))
        .render_help()
        .to_string()
}

/// The provider controllers `--controllers` enables, and their settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ProviderSettings {
    /// In the provider's declared order.
    pub(crate) enabled: Vec<ProviderController>,
    pub(crate) settings: ProviderControllerSettings,
    /// Flags accepted that change nothing here, with why.
    pub(crate) notes: Vec<String>,
}

fn has(extras: &[ProviderController], kind: ProviderControllerKind) -> bool {
    extras.iter().any(|c| c.kind == kind)
}

/// `command` with the flags of the provider's controllers.
fn augment(mut command: Command, extras: &[ProviderController]) -> Command {
    if has(extras, ProviderControllerKind::InstanceTagging) {
        command = TaggingFlags::augment_args(command.next_help_heading("Tagging controller flags"));
    }
    if has(extras, ProviderControllerKind::NodeIpam) {
        command =
            NodeIpamFlags::augment_args(command.next_help_heading("Nodeipam controller flags"));
    }
    command
}

/// Whether `notes` (about flags that mean nothing here) still hold with
/// `enabled`: with a node-IPAM controller on, pod-CIDR allocation flags
/// are no longer inert.
fn keeps_note(note: &str, enabled: &[ProviderController]) -> bool {
    let ipam = enabled
        .iter()
        .any(|c| c.kind == ProviderControllerKind::NodeIpam);
    !(ipam
        && (note.starts_with("--allocate-node-cidrs") || note.starts_with("--cidr-allocator-type")))
}

/// Takes the provider controllers' names out of `--controllers`: the rest
/// is for `parse_controllers`. A name is on when named and not
/// also named with `-`.
fn split_controllers(
    items: &[String],
    extras: &[ProviderController],
) -> (Vec<String>, Vec<ProviderController>) {
    let mut generic = Vec::new();
    let mut on = BTreeSet::new();
    let mut off = BTreeSet::new();
    for item in items {
        let trimmed = item.trim();
        let (negated, name) = match trimmed.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, trimmed),
        };
        if extras.iter().any(|c| c.name == name) {
            if negated {
                off.insert(name)
            } else {
                on.insert(name)
            };
        } else {
            generic.push(item.clone());
        }
    }
    let enabled = extras
        .iter()
        .filter(|c| on.contains(c.name) && !off.contains(c.name))
        .copied()
        .collect();
    (generic, enabled)
}

/// The settings of the enabled provider controllers, validated as upstream.
///
/// # Errors
/// One line naming the flag.
fn provider_settings(
    matches: &ArgMatches,
    extras: &[ProviderController],
    enabled: Vec<ProviderController>,
    cluster_cidrs: &[IpNet],
) -> Result<ProviderSettings, String> {
    let mut out = ProviderSettings::default();
    let on = |kind| enabled.iter().any(|c: &ProviderController| c.kind == kind);
    if has(extras, ProviderControllerKind::InstanceTagging) {
        let flags = TaggingFlags::from_arg_matches(matches).map_err(|e| e.to_string())?;
        let tags = parse_tags(&flags.tags)?;
        if on(ProviderControllerKind::InstanceTagging) {
            out.settings.tags = tags;
            out.settings.tagging_rate = tagging_settings(&flags, &out.settings.tags)?;
            if flags.tagging_controller_concurrent_node_syncs != 1 {
                out.notes.push("--tagging-controller-concurrent-node-syncs: upstream tags with this many workers; here joining nodes share batched calls".into());
            }
            if flags.tagging_controller_enable_batching {
                out.notes.push("--tagging-controller-enable-batching: tag calls are always batched here, up to 1,000 instances a call".into());
            }
        }
    }
    if has(extras, ProviderControllerKind::NodeIpam) {
        let flags = NodeIpamFlags::from_arg_matches(matches).map_err(|e| e.to_string())?;
        if on(ProviderControllerKind::NodeIpam) {
            out.settings.nodeipam_rate = queue_rate(
                "nodeipam",
                flags.nodeipam_controller_rate_limit,
                flags.nodeipam_controller_burst_limit,
            )?;
            out.settings.dual_stack = flags.dualstack;
            out.settings.node_cidr_mask_size = match flags.node_cidr_mask_size {
                0 => 24,
                n => u8::try_from(n)
                    .map_err(|_| format!("--node-cidr-mask-size={n}: must be between 1 and 32"))?,
            };
            if flags.dualstack {
                ccm_controllers::dual_stack_cluster_cidr(
                    cluster_cidrs,
                    out.settings.node_cidr_mask_size,
                )?;
            }
        }
    }
    out.enabled = enabled;
    Ok(out)
}

fn tagging_settings(
    flags: &TaggingFlags,
    tags: &BTreeMap<String, String>,
) -> Result<Option<QueueRate>, String> {
    if tags.is_empty() {
        return Err("--tags must not be empty and must be a form of key=value".into());
    }
    if flags.resources.is_empty() {
        return Err("--resources must not be empty".into());
    }
    let rate = queue_rate(
        "tagging",
        flags.tagging_controller_rate_limit,
        flags.tagging_controller_burst_limit,
    )?;
    if flags.tagging_controller_concurrent_node_syncs <= 0 {
        return Err("--tagging-controller-concurrent-node-syncs must be a positive number".into());
    }
    if let Some(other) = flags.resources.iter().find(|r| *r != INSTANCE) {
        return Err(format!(
            "--resources: {other} is not a supported resource. Current supported resources [{INSTANCE}]"
        ));
    }
    Ok(rate)
}

/// Upstream's work-queue limit: on when both are above zero.
fn queue_rate(controller: &str, qps: f64, burst: i64) -> Result<Option<QueueRate>, String> {
    if qps < 0.0 || qps.is_nan() {
        return Err(format!(
            "--{controller}-controller-rate-limit should not be less than zero"
        ));
    }
    if burst < 0 {
        return Err(format!(
            "--{controller}-controller-burst-limit should not be less than zero"
        ));
    }
    Ok((qps > 0.0 && burst > 0).then(|| QueueRate {
        qps,
        burst: u32::try_from(burst).unwrap_or(u32::MAX),
    }))
}

/// pflag's `stringToString`: `key=value` pairs separated by commas; a
/// repeated flag adds to the map.
fn parse_tags(values: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut tags = BTreeMap::new();
    for pair in values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--tags: `{pair}` must be formatted as key=value"))?;
        tags.insert(key.to_owned(), value.to_owned());
    }
    Ok(tags)
}
