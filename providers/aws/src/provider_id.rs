//! Provider IDs: `aws:///<zone>/<instance-id>`, as upstream writes them, and
//! the forms it reads (`aws:////<id>`, a bare `<id>`).

/// The instance ID in a node's `spec.providerID` cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProviderIdError {
    /// Another cloud's provider ID.
    #[error("provider ID `{0}` is not an AWS provider ID (expected aws:///<zone>/<instance-id>)")]
    NotAws(String),
    /// An AWS provider ID whose last part is not an instance ID.
    #[error("provider ID `{0}` does not end in an EC2 instance ID such as i-0123456789abcdef0")]
    Malformed(String),
}

/// The EC2 instance ID in `provider_id`.
pub(crate) fn instance_id(provider_id: &str) -> Result<&str, ProviderIdError> {
    let path = match provider_id.split_once("://") {
        Some(("aws", rest)) => rest,
        Some(_) => return Err(ProviderIdError::NotAws(provider_id.to_owned())),
        None => provider_id,
    };
    let id = path
        .trim_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if is_instance_id(id) {
        Ok(id)
    } else {
        Err(ProviderIdError::Malformed(provider_id.to_owned()))
    }
}

/// `aws:///<zone>/<instance-id>`.
pub(crate) fn format(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The instance ID a node name stands for, when the node is named after its
/// instance (resource-based hostnames such as `i-0abc.ec2.internal`).
pub(crate) fn instance_id_from_node_name(name: &str) -> Option<&str> {
    let id = name.split('.').next().unwrap_or_default();
    is_instance_id(id).then_some(id)
}

/// `i-` followed by letters and digits.
fn is_instance_id(s: &str) -> bool {
    s.strip_prefix("i-")
        .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_form_upstream_reads() {
        for id in [
            "aws:///us-east-1a/i-0123456789abcdef0",
            "aws:////i-0123456789abcdef0",
            "i-0123456789abcdef0",
        ] {
            assert_eq!(instance_id(id), Ok("i-0123456789abcdef0"), "{id}");
        }
    }

    #[test]
    fn refuses_other_clouds_and_malformed_ids() {
        assert!(matches!(
            instance_id("gce://project/zone/vm"),
            Err(ProviderIdError::NotAws(_))
        ));
        for bad in [
            "aws:///us-east-1a/",
            "aws:///us-east-1a/vm-1",
            "aws:///us-east-1a/i-",
            "aws:///us-east-1a/i-01$2",
            "",
        ] {
            assert!(
                matches!(instance_id(bad), Err(ProviderIdError::Malformed(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn formats_with_zone() {
        assert_eq!(format("us-east-1a", "i-1"), "aws:///us-east-1a/i-1");
    }

    #[test]
    fn node_names_after_instances_give_the_instance() {
        assert_eq!(
            instance_id_from_node_name("i-0abc.us-east-1.compute.internal"),
            Some("i-0abc")
        );
        assert_eq!(instance_id_from_node_name("i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id_from_node_name("ip-10-0-1-4.ec2.internal"), None);
    }
}
