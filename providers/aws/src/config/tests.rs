//! The cloud config: every key upstream reads, its defaults, and the errors
//! that name file, line and key.

use ccm_cloud_provider::{CloudConfig, ConfigError};

use super::*;

fn parse(text: &str) -> Result<AwsConfig, ConfigError> {
    AwsConfig::parse(&CloudConfig::new("/etc/aws.conf", text))
}

#[test]
fn reads_every_global_key_upstream_names() {
    let config = parse(
        "[Global]\n\
         Zone = eu-west-1b\n\
         VPC = vpc-0abc\n\
         SubnetID = subnet-0abc\n\
         RouteTableID = rtb-0abc\n\
         RoleARN = arn:aws:iam::123456789012:role/ccm\n\
         KubernetesClusterTag = prod\n\
         KubernetesClusterID = prod\n\
         DisableSecurityGroupIngress = true\n\
         ElbSecurityGroup = sg-0abc\n\
         NodeIPFamilies = ipv6\n\
         NodeIPFamilies = ipv4\n",
    )
    .expect("valid config");
    assert_eq!(config.zone.as_deref(), Some("eu-west-1b"));
    assert_eq!(config.region().as_deref(), Some("eu-west-1"));
    assert_eq!(config.vpc.as_deref(), Some("vpc-0abc"));
    assert_eq!(config.subnet_id.as_deref(), Some("subnet-0abc"));
    assert_eq!(config.route_table_id.as_deref(), Some("rtb-0abc"));
    assert_eq!(
        config.role_arn.as_deref(),
        Some("arn:aws:iam::123456789012:role/ccm")
    );
    assert_eq!(config.cluster_id(), Some("prod"));
    assert!(config.disable_security_group_ingress);
    assert_eq!(config.elb_security_group.as_deref(), Some("sg-0abc"));
    assert_eq!(config.node_ip_families, [IpFamily::Ipv6, IpFamily::Ipv4]);
}

#[test]
fn keys_and_sections_match_case_insensitively_as_gcfg_does() {
    let config = parse("[global]\nvpc = vpc-1\nkubernetes-cluster-id = c1\n").expect("valid");
    assert_eq!(config.vpc.as_deref(), Some("vpc-1"));
    assert_eq!(config.cluster_id(), Some("c1"));
}

#[test]
fn defaults_to_ipv4_addresses_and_no_overrides() {
    let config = parse("").expect("empty config is valid");
    assert_eq!(config.node_ip_families, [IpFamily::Ipv4]);
    assert!(config.service_overrides.is_empty());
    assert!(!config.disable_security_group_ingress);
}

#[test]
fn a_bare_boolean_key_means_true() {
    let config = parse("[Global]\nDisableSecurityGroupIngress\n").expect("valid");
    assert!(config.disable_security_group_ingress);
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let err = parse("[Global]\nZone = us-east-1a\nZonne = us-east-1b\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/aws.conf:3: unknown key `Zonne` in [Global]"
    );
}

#[test]
fn the_topology_pattern_is_a_regular_expression() {
    let config =
        parse("[Global]\nSupportedTopologyInstanceTypePattern = ^(p|trn)[0-9]\n").expect("valid");
    assert_eq!(
        config
            .topology_instance_types
            .as_ref()
            .map(TypePattern::as_str),
        Some("^(p|trn)[0-9]")
    );
    let err = parse("[Global]\nSupportedTopologyInstanceTypePattern = ^(p\n").unwrap_err();
    assert!(
        err.to_string().starts_with(
            "/etc/aws.conf:2: `SupportedTopologyInstanceTypePattern` is not a regular expression: "
        ) && !err.to_string().contains('\n'),
        "{err}"
    );
}

#[test]
fn source_arn_goes_with_the_role() {
    let config = parse(
        "[Global]\nRoleARN = arn:aws:iam::123456789012:role/ccm\n\
         SourceARN = arn:aws:eks:us-east-1:123456789012:cluster/prod\n",
    )
    .expect("valid");
    assert_eq!(
        config.source_arn.as_deref(),
        Some("arn:aws:eks:us-east-1:123456789012:cluster/prod")
    );
    assert_eq!(parse("[Global]\nSourceARN =\n").unwrap().source_arn, None);
    let err = parse("[Global]\nSourceARN = prod\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/aws.conf:2: `SourceARN` must be an ARN such as \
         arn:aws:eks:us-east-1:123456789012:cluster/prod"
    );
}

#[test]
fn the_shared_health_probe_is_kube_proxys_unless_the_config_says_otherwise() {
    let probe = |text: &str| {
        parse(&format!("[Global]\n{text}"))
            .unwrap()
            .shared_health_probe
    };
    let kube_proxy = SharedHealthProbe {
        port: 10256,
        path: "/healthz".to_owned(),
    };
    let cases = [
        ("", None),
        ("ClusterServiceLoadBalancerHealthProbeMode =\n", None),
        (
            "ClusterServiceLoadBalancerHealthProbeMode = ServiceNodePort\n",
            None,
        ),
        // Port and path matter only in the shared mode, as upstream.
        (
            "ClusterServiceSharedLoadBalancerHealthProbePort = 8080\n",
            None,
        ),
        (
            "ClusterServiceLoadBalancerHealthProbeMode = Shared\n",
            Some(kube_proxy.clone()),
        ),
        (
            "ClusterServiceSharedLoadBalancerHealthProbePort = 0\n\
             ClusterServiceLoadBalancerHealthProbeMode = Shared\n",
            Some(kube_proxy),
        ),
        (
            "ClusterServiceSharedLoadBalancerHealthProbePath = /livez\n\
             ClusterServiceSharedLoadBalancerHealthProbePort = 10257\n\
             ClusterServiceLoadBalancerHealthProbeMode = Shared\n",
            Some(SharedHealthProbe {
                port: 10257,
                path: "/livez".to_owned(),
            }),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(probe(text), expected, "{text}");
    }
    let refused = [
        (
            "ClusterServiceLoadBalancerHealthProbeMode = shared",
            "`ClusterServiceLoadBalancerHealthProbeMode` must be Shared, ServiceNodePort or empty",
        ),
        (
            "ClusterServiceSharedLoadBalancerHealthProbePort = 70000",
            "`ClusterServiceSharedLoadBalancerHealthProbePort` must be a port from 1 to 65535",
        ),
        (
            "ClusterServiceSharedLoadBalancerHealthProbePath = healthz",
            "`ClusterServiceSharedLoadBalancerHealthProbePath` must start with /",
        ),
    ];
    for (line, expected) in refused {
        let err = parse(&format!("[Global]\n{line}\n")).unwrap_err();
        assert_eq!(err.to_string(), format!("/etc/aws.conf:2: {expected}"));
    }
}

#[test]
fn nlb_security_groups_are_managed_only_when_asked_as_upstream() {
    assert!(!parse("[Global]\n").unwrap().nlb_security_group_managed);
    assert!(
        !parse("[Global]\nNLBSecurityGroupMode =\n")
            .unwrap()
            .nlb_security_group_managed
    );
    assert!(
        parse("[Global]\nNLBSecurityGroupMode = Managed\n")
            .unwrap()
            .nlb_security_group_managed
    );
    let err = parse("[Global]\nNLBSecurityGroupMode = managed\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/aws.conf:2: `NLBSecurityGroupMode` must be Managed or empty"
    );
}

#[test]
fn malformed_values_name_the_key_and_expected_form() {
    let cases = [
        ("VPC = 12345", "`VPC` must look like vpc-"),
        ("RouteTableID = table", "`RouteTableID` must look like rtb-"),
        ("Zone = nowhere", "`Zone` must be an availability zone"),
        (
            "NodeIPFamilies = ipv5",
            "`NodeIPFamilies` must be ipv4 or ipv6",
        ),
        (
            "DisableSecurityGroupIngress = maybe",
            "must be true or false",
        ),
        ("RoleARN = ccm-role", "`RoleARN` must be an IAM role ARN"),
    ];
    for (line, expected) in cases {
        let err = parse(&format!("[Global]\n{line}\n")).unwrap_err();
        assert!(
            err.to_string().starts_with("/etc/aws.conf:2: ") && err.message().contains(expected),
            "{line}: {err}"
        );
    }
}

#[test]
fn mismatched_cluster_ids_are_refused() {
    let err = parse("[Global]\nKubernetesClusterTag = a\nKubernetesClusterID = b\n").unwrap_err();
    assert!(err.message().contains("must match"), "{err}");
}

#[test]
fn unknown_section_is_refused_at_its_header() {
    let err = parse("[Global]\n\n[Globl]\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/etc/aws.conf:3: unknown section [Globl]"),
        "{err}"
    );
}

#[test]
fn syntax_errors_carry_their_line() {
    let err = parse("[Global]\nZone = \"us-east-1a\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/aws.conf:2: the value of `Zone` has an unterminated quote"
    );
}

/// Every value check, and every syntax error, fed a value carrying a
/// marker: the error names the line and key and never shows the value.
#[test]
fn no_error_shows_a_value() {
    const MARK: &str = "hunter2";
    let cases = [
        "VPC = hunter2",
        "SubnetID = hunter2",
        "RouteTableID = hunter2",
        "ElbSecurityGroup = hunter2",
        "Zone = hunter2",
        "NLBSecurityGroupMode = hunter2",
        "RoleARN = hunter2",
        "SourceARN = hunter2",
        "ClusterServiceLoadBalancerHealthProbeMode = hunter2",
        "ClusterServiceSharedLoadBalancerHealthProbePort = hunter2",
        "ClusterServiceSharedLoadBalancerHealthProbePath = hunter2",
        "DisableSecurityGroupIngress = hunter2",
        "NodeIPFamilies = hunter2",
        "SupportedTopologyInstanceTypePattern = (hunter2",
        "Zone = \"hunter2",
        "Zone = hunter2\\q",
        "Zone: hunter2",
    ];
    for line in cases {
        let err = parse(&format!("[Global]\n{line}\n")).expect_err(line);
        let shown = err.to_string();
        assert!(shown.starts_with("/etc/aws.conf:2: "), "{line}: {shown}");
        assert!(!shown.contains(MARK), "{line}: {shown}");
        if let Some((key, _)) = line.split_once(" =") {
            assert!(shown.contains(&format!("`{key}`")), "{line}: {shown}");
        }
    }
    let err = parse("[Global]\nKubernetesClusterTag = hunter2\nKubernetesClusterID = b\n")
        .unwrap_err()
        .to_string();
    assert!(!err.contains(MARK), "{err}");
    let err = parse("[Global]\nRoleARN =\n  hunter2\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("/etc/aws.conf:3: unknown key") && !err.contains(MARK),
        "a wrapped value is not shown as a key: {err}"
    );
    let one = "Service = ec2\nRegion = hunter2\nURL = http://x\nSigningRegion = r\n";
    for text in [
        format!("[ServiceOverride \"1\"]\n{one}[ServiceOverride \"2\"]\n{one}"),
        "[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = hunter2\nSigningRegion = r\n"
            .to_owned(),
        "[ServiceOverride \"1\"]\nhunter2\n".to_owned(),
    ] {
        let err = parse(&text).expect_err(&text).to_string();
        assert!(!err.contains(MARK), "{text}: {err}");
    }
}

const OVERRIDES: &str = "[Global]\nRegion = us-east-1\n\
    [ServiceOverride \"1\"]\nService = ec2\nRegion = us-east-1\nURL = http://127.0.0.1:5000\nSigningRegion = us-east-1\n\
    [ServiceOverride \"2\"]\nService = Elastic Load Balancing v2\nRegion = us-east-1\nURL = http://127.0.0.1:5000\nSigningRegion = us-east-1\nSigningMethod = v4\n";

#[test]
fn service_overrides_apply_to_their_service_and_region() {
    let config = parse(OVERRIDES).expect("valid");
    assert_eq!(config.service_overrides.len(), 2);
    let ec2 = config
        .service_override(AwsService::Ec2, "us-east-1")
        .expect("ec2 override");
    assert_eq!(ec2.url, "http://127.0.0.1:5000");
    assert_eq!(ec2.index, "1");
    assert!(
        config
            .service_override(AwsService::Elbv2, "us-east-1")
            .is_some()
    );
    assert!(
        config
            .service_override(AwsService::Ec2, "eu-west-1")
            .is_none()
    );
    assert!(
        config
            .service_override(AwsService::Sts, "us-east-1")
            .is_none()
    );
}

#[test]
fn the_shared_elb_endpoint_id_applies_to_elbv2() {
    let config = parse(
        "[ServiceOverride \"1\"]\nService = elasticloadbalancing\nRegion = r\nURL = https://elb.example\nSigningRegion = r\n",
    )
    .expect("valid");
    assert!(config.service_override(AwsService::Elbv2, "r").is_some());
}

#[test]
fn service_override_missing_a_required_key_names_it() {
    for (missing, text) in [
        ("Service", "Region = r\nURL = http://x\nSigningRegion = r\n"),
        (
            "Region",
            "Service = ec2\nURL = http://x\nSigningRegion = r\n",
        ),
        ("URL", "Service = ec2\nRegion = r\nSigningRegion = r\n"),
        (
            "SigningRegion",
            "Service = ec2\nRegion = r\nURL = http://x\n",
        ),
    ] {
        let err = parse(&format!("[ServiceOverride \"7\"]\n{text}")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("/etc/aws.conf:1: [ServiceOverride \"7\"] is missing `{missing}`")
        );
    }
}

#[test]
fn duplicate_service_overrides_are_refused() {
    let one = "Service = ec2\nRegion = r\nURL = http://x\nSigningRegion = r\n";
    let err = parse(&format!(
        "[ServiceOverride \"1\"]\n{one}[ServiceOverride \"2\"]\n{one}"
    ))
    .unwrap_err();
    assert!(
        err.to_string().starts_with("/etc/aws.conf:6: duplicate"),
        "{err}"
    );
}

#[test]
fn service_override_url_must_be_http() {
    let err = parse(
        "[ServiceOverride \"1\"]\nService = ec2\nRegion = r\nURL = 127.0.0.1:5000\nSigningRegion = r\n",
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("/etc/aws.conf:4: `URL`"),
        "{err}"
    );
}

#[test]
fn unknown_service_override_key_is_refused() {
    let err = parse("[ServiceOverride \"1\"]\nEndpoint = x\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/etc/aws.conf:2: unknown key `Endpoint` in [ServiceOverride \"1\"]"),
        "{err}"
    );
}

#[test]
fn zones_map_to_their_region() {
    assert_eq!(region_of_zone("us-east-1a"), Some("us-east-1"));
    assert_eq!(region_of_zone("us-gov-west-1b"), Some("us-gov-west-1"));
    assert_eq!(region_of_zone("us-west-2-lax-1a"), Some("us-west-2"));
    assert_eq!(region_of_zone("east"), None);
    assert_eq!(region_of_zone("1a"), None);
}
