//! `[ServiceOverride "N"]`: a custom endpoint for one service in one region,
//! as upstream reads it. Tests use it to point the provider at moto.

use super::key_is;
use ccm_cloud_provider::gcfg::Section;

/// One `[ServiceOverride "N"]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceOverride {
    /// The `N` of the section header.
    pub index: String,
    /// `Service`: `ec2`, `elasticloadbalancing`, `sts`, `imds`, ... (upstream's
    /// SDK service IDs, such as `EC2` or `Elastic Load Balancing v2`, also match).
    pub service: String,
    /// `Region`: the client region the override applies to.
    pub region: String,
    /// `URL`: the endpoint, `http://` or `https://`.
    pub url: String,
    /// `SigningRegion`: the region requests are signed for.
    pub signing_region: String,
    /// `SigningMethod`: accepted for compatibility; requests are always SigV4.
    pub signing_method: Option<String>,
    /// `SigningName`: the service name requests are signed for, when not the
    /// service's own.
    pub signing_name: Option<String>,
}

/// The services whose endpoints this provider calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AwsService {
    Ec2,
    Elbv2,
    Sts,
    Imds,
}

impl ServiceOverride {
    /// Whether this override is for `service`. `elasticloadbalancing` is the
    /// endpoint ID ELB and ELBv2 share, so it applies to ELBv2.
    pub(crate) fn applies_to(&self, service: AwsService) -> bool {
        let name: String = self
            .service
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        match service {
            AwsService::Ec2 => name == "ec2",
            AwsService::Elbv2 => matches!(
                name.as_str(),
                "elasticloadbalancing" | "elasticloadbalancingv2" | "elbv2"
            ),
            AwsService::Sts => name == "sts",
            AwsService::Imds => name == "imds",
        }
    }

    /// Reads one section; errors carry the line at fault.
    pub(crate) fn from_section(section: &Section) -> Result<Self, (usize, String)> {
        let index = section.subsection.clone().ok_or_else(|| {
            (
                section.line,
                "[ServiceOverride] needs a quoted name, as in [ServiceOverride \"1\"]".to_owned(),
            )
        })?;
        let mut fields: [Option<String>; 6] = Default::default();
        const KEYS: [&str; 6] = [
            "Service",
            "Region",
            "URL",
            "SigningRegion",
            "SigningMethod",
            "SigningName",
        ];
        for entry in &section.entries {
            let Some(slot) = KEYS.iter().position(|k| key_is(&entry.key, k)) else {
                return Err((
                    entry.line,
                    format!(
                        "unknown key {} in [ServiceOverride \"{index}\"] (known: {})",
                        entry.shown_key(),
                        KEYS.join(", ")
                    ),
                ));
            };
            let value = entry.value.as_deref().unwrap_or_default().trim();
            fields[slot] = (!value.is_empty()).then(|| value.to_owned());
        }
        let [
            service,
            region,
            url,
            signing_region,
            signing_method,
            signing_name,
        ] = fields;
        let required = |value: Option<String>, key: &str| {
            value.ok_or_else(|| {
                (
                    section.line,
                    format!("[ServiceOverride \"{index}\"] is missing `{key}`"),
                )
            })
        };
        let parsed = Self {
            service: required(service, "Service")?,
            region: required(region, "Region")?,
            url: required(url, "URL")?,
            signing_region: required(signing_region, "SigningRegion")?,
            signing_method,
            signing_name,
            index: index.clone(),
        };
        let url_line = section
            .entries
            .iter()
            .find(|e| key_is(&e.key, "URL"))
            .map_or(section.line, |e| e.line);
        let rest = parsed
            .url
            .strip_prefix("http://")
            .or_else(|| parsed.url.strip_prefix("https://"));
        if rest.is_none_or(|host| host.is_empty() || host.starts_with('/')) {
            return Err((
                url_line,
                format!(
                    "`URL` in [ServiceOverride \"{index}\"] must be an http:// or https:// URL"
                ),
            ));
        }
        Ok(parsed)
    }
}
