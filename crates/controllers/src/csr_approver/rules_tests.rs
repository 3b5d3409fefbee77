//! One test per approval rule.

use super::*;

fn nodes_group() -> Vec<String> {
    vec!["system:nodes".to_owned(), "system:authenticated".to_owned()]
}

fn usages(list: &[&str]) -> Vec<String> {
    list.iter().map(|u| (*u).to_owned()).collect()
}

fn requested(cn: &str, dns: &[&str], ips: &[&str]) -> Requested {
    Requested {
        common_names: vec![cn.to_owned()],
        organizations: vec!["system:nodes".to_owned()],
        dns_names: dns.iter().map(|d| (*d).to_owned()).collect(),
        ip_addresses: ips.iter().map(|i| i.parse().expect("ip")).collect(),
        ..Requested::default()
    }
}

fn serving() -> Vec<String> {
    usages(&["digital signature", "server auth"])
}

fn check(username: &str, usages: &[String], requested: &Requested) -> Result<String, Denial> {
    let groups = nodes_group();
    node_of(
        Request {
            username,
            groups: &groups,
            usages,
        },
        Ok(requested),
    )
}

fn reason(result: Result<String, Denial>) -> (Reason, String) {
    let denial = result.expect_err("denied");
    (denial.reason, denial.message)
}

fn addresses() -> Vec<NodeAddress> {
    vec![
        NodeAddress::new(NodeAddressType::InternalIp, "10.0.0.5"),
        NodeAddress::new(NodeAddressType::ExternalIp, "203.0.113.5"),
        NodeAddress::new(NodeAddressType::InternalIp, "fd00::5"),
        NodeAddress::new(NodeAddressType::Hostname, "ip-10-0-0-5.ec2.internal"),
    ]
}

#[test]
fn a_node_asking_for_its_own_name_with_serving_usages_passes() {
    let req = requested(
        "system:node:a",
        &["ip-10-0-0-5.ec2.internal"],
        &["10.0.0.5"],
    );
    assert_eq!(check("system:node:a", &serving(), &req), Ok("a".to_owned()));
    let rsa = usages(&["key encipherment", "digital signature", "server auth"]);
    assert_eq!(check("system:node:a", &rsa, &req), Ok("a".to_owned()));
}

#[test]
fn a_requester_that_is_not_a_node_is_denied() {
    let req = requested("system:node:a", &[], &["10.0.0.5"]);
    for user in [
        "alice",
        "system:node:",
        "system:serviceaccount:kube-system:x",
    ] {
        let (why, message) = reason(check(user, &serving(), &req));
        assert_eq!(why, Reason::NotANode);
        assert!(message.contains(&format!("{user:?}")), "{message}");
    }
}

#[test]
fn a_requester_outside_system_nodes_is_denied() {
    let req = requested("system:node:a", &[], &["10.0.0.5"]);
    let groups = vec!["system:authenticated".to_owned()];
    let result = node_of(
        Request {
            username: "system:node:a",
            groups: &groups,
            usages: &serving(),
        },
        Ok(&req),
    );
    assert_eq!(reason(result).0, Reason::NotInNodesGroup);
}

#[test]
fn an_unreadable_request_is_denied_with_why() {
    let groups = nodes_group();
    let result = node_of(
        Request {
            username: "system:node:a",
            groups: &groups,
            usages: &serving(),
        },
        Err("not PEM"),
    );
    let (why, message) = reason(result);
    assert_eq!(why, Reason::UnreadableRequest);
    assert!(message.ends_with("not PEM"), "{message}");
}

#[test]
fn a_node_asking_for_another_nodes_name_is_denied() {
    let req = requested("system:node:b", &[], &["10.0.0.5"]);
    let (why, message) = reason(check("system:node:a", &serving(), &req));
    assert_eq!(why, Reason::SubjectMismatch);
    assert!(message.contains("\"system:node:b\""), "{message}");
    let mut other_org = requested("system:node:a", &[], &["10.0.0.5"]);
    other_org.organizations = vec!["system:masters".to_owned()];
    let (why, message) = reason(check("system:node:a", &serving(), &other_org));
    assert_eq!(why, Reason::SubjectMismatch);
    assert!(message.contains("system:masters"), "{message}");
}

#[test]
fn extra_or_missing_usages_are_denied() {
    let req = requested("system:node:a", &[], &["10.0.0.5"]);
    let client = usages(&["digital signature", "server auth", "client auth"]);
    let (why, message) = reason(check("system:node:a", &client, &req));
    assert_eq!(why, Reason::UsageMismatch);
    assert!(message.contains("\"client auth\""), "{message}");
    let (why, message) = reason(check("system:node:a", &usages(&["server auth"]), &req));
    assert_eq!(why, Reason::UsageMismatch);
    assert!(
        message.contains("\"digital signature\" is missing"),
        "{message}"
    );
}

#[test]
fn email_uri_and_other_names_are_denied() {
    let mut req = requested("system:node:a", &[], &["10.0.0.5"]);
    req.emails = vec!["root@example.com".to_owned()];
    let (why, message) = reason(check("system:node:a", &serving(), &req));
    assert_eq!(why, Reason::ForbiddenAltName);
    assert!(message.contains("root@example.com"), "{message}");
    req.emails.clear();
    req.uris = vec!["spiffe://cluster/ns/x".to_owned()];
    let (why, message) = reason(check("system:node:a", &serving(), &req));
    assert_eq!(why, Reason::ForbiddenAltName);
    assert!(message.contains("spiffe://cluster/ns/x"), "{message}");
}

#[test]
fn a_request_without_names_is_denied() {
    let req = requested("system:node:a", &[], &[]);
    assert_eq!(
        reason(check("system:node:a", &serving(), &req)).0,
        Reason::NoAltName
    );
}

#[test]
fn every_name_must_be_one_the_cloud_reports() {
    let req = requested(
        "system:node:a",
        &["IP-10-0-0-5.ec2.internal"],
        &["10.0.0.5", "203.0.113.5", "fd00:0:0::5"],
    );
    assert_eq!(check_addresses("a", &req, &addresses()), Ok(()));
}

#[test]
fn a_forged_ip_or_dns_name_is_denied_naming_it() {
    let forged_ip = requested("system:node:a", &[], &["10.0.0.5", "10.9.9.9"]);
    let denial = check_addresses("a", &forged_ip, &addresses()).expect_err("denied");
    assert_eq!(denial.reason, Reason::AddressNotOfNode);
    assert!(denial.message.contains("10.9.9.9"), "{}", denial.message);
    assert!(
        denial.message.contains("10.0.0.5, 203.0.113.5"),
        "{}",
        denial.message
    );
    let forged_dns = requested("system:node:a", &["kubernetes.default.svc"], &[]);
    let denial = check_addresses("a", &forged_dns, &addresses()).expect_err("denied");
    assert!(
        denial.message.contains("\"kubernetes.default.svc\""),
        "{}",
        denial.message
    );
}

#[test]
fn an_ip_is_not_accepted_as_a_dns_name_nor_a_name_as_an_ip() {
    let as_dns = requested("system:node:a", &["10.0.0.5"], &[]);
    assert!(check_addresses("a", &as_dns, &addresses()).is_err());
    let hostname_only = vec![NodeAddress::new(NodeAddressType::Hostname, "10.0.0.5")];
    let as_ip = requested("system:node:a", &[], &["10.0.0.5"]);
    assert!(check_addresses("a", &as_ip, &hostname_only).is_err());
}

#[test]
fn a_changed_address_is_denied() {
    // The instance had 10.0.0.4 when the kubelet asked; it has 10.0.0.5 now.
    let stale = requested("system:node:a", &[], &["10.0.0.4"]);
    let denial = check_addresses("a", &stale, &addresses()).expect_err("denied");
    assert!(denial.message.contains("10.0.0.4"), "{}", denial.message);
}

#[test]
fn long_values_are_cut_in_messages() {
    let long = "x".repeat(5000);
    let req = requested(&long, &[], &["10.0.0.5"]);
    let (_, message) = reason(check("system:node:a", &serving(), &req));
    assert!(message.len() < 400, "{}", message.len());
}

fn instance_named(names: &[&str]) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: "aws:///eu-west-1a/i-0abc".to_owned(),
        node_names: names.iter().map(|n| (*n).to_owned()).collect(),
        ..InstanceMetadata::default()
    }
}

#[test]
fn a_node_is_approved_only_for_the_instance_the_cloud_names_after_it() {
    let aws = instance_named(&["ip-10-0-0-5.ec2.internal", "i-0abc"]);
    assert_eq!(
        check_instance("ip-10-0-0-5.ec2.internal", &aws, &[]),
        Ok(())
    );
    assert_eq!(check_instance("i-0abc", &aws, &[]), Ok(()));
    let (why, message) = reason(check_instance("b", &aws, &[]).map(|()| String::new()));
    assert_eq!(why, Reason::InstanceNameMismatch);
    assert!(
        message.contains("ip-10-0-0-5.ec2.internal") && message.contains("node b"),
        "{message}"
    );
    let (reason, message) =
        reason(check_instance("a", &instance_named(&[]), &[]).map(|()| String::new()));
    assert_eq!(
        reason,
        Reason::InstanceNameMismatch,
        "a provider that cannot tell: {message}"
    );
}

#[test]
fn a_provider_id_another_node_carries_is_denied() {
    let aws = instance_named(&["a"]);
    let (why, message) =
        reason(check_instance("a", &aws, &["b".to_owned()]).map(|()| String::new()));
    assert_eq!(why, Reason::ProviderIdNotUnique);
    assert!(
        message.contains("node b") && message.contains("i-0abc"),
        "{message}"
    );
}
