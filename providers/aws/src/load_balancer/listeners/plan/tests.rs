//! The listeners' plan: what it decides for one port move, and its
//! properties when carried out on a model of the listeners.

use aws_sdk_elasticloadbalancingv2::types::Certificate;

use super::*;
use crate::load_balancer::listeners::{certificates, forward};

fn port(protocol: ProtocolEnum, cert: Option<&str>, policy: Option<&str>) -> PortMapping {
    PortMapping {
        port: 443,
        name: None,
        listener_protocol: protocol,
        node_port: 30443,
        target_protocol: ProtocolEnum::Tcp,
        certificate_arn: cert.map(str::to_owned),
        ssl_policy: policy.map(str::to_owned),
    }
}

fn listener(
    protocol: ProtocolEnum,
    tg: &str,
    cert: Option<&str>,
    policy: Option<&str>,
) -> Listener {
    let mut b = Listener::builder()
        .port(443)
        .protocol(protocol)
        .default_actions(forward(tg));
    if let Some(c) = cert {
        b = b.certificates(Certificate::builder().certificate_arn(c).build());
    }
    if let Some(p) = policy {
        b = b.ssl_policy(p);
    }
    b.build()
}

const POLICY: &str = "ELBSecurityPolicy-TLS13-1-2-2021-06";

#[test]
fn a_listener_matches_when_protocol_target_and_tls_settings_agree() {
    let tls = port(ProtocolEnum::Tls, Some("arn:cert"), Some(POLICY));
    let on = |tg, cert| listener(ProtocolEnum::Tls, tg, Some(cert), Some(POLICY));
    assert!(listener_matches(&on("tg1", "arn:cert"), &tls, "tg1"));
    assert!(!listener_matches(&on("tg2", "arn:cert"), &tls, "tg1"));
    assert!(!listener_matches(&on("tg1", "arn:other"), &tls, "tg1"));
    assert!(!listener_matches(
        &listener(ProtocolEnum::Tcp, "tg1", None, None),
        &tls,
        "tg1"
    ));
}

#[test]
fn a_tcp_listener_ignores_the_policy_aws_reports() {
    // moto and AWS may report a default policy on any listener.
    let tcp = port(ProtocolEnum::Tcp, None, None);
    let reported = listener(
        ProtocolEnum::Tcp,
        "tg1",
        None,
        Some("ELBSecurityPolicy-2016-08"),
    );
    assert!(listener_matches(&reported, &tcp, "tg1"));
}

#[test]
fn a_moved_port_creates_its_listener_then_deletes_the_old_one_then_its_group() {
    let mut moved = port(ProtocolEnum::Tcp, None, None);
    moved.port = 80;
    let old = made(&moved, "tg-80");
    moved.port = 8080;
    let wanted = [(&moved, "tg-8080".to_owned())];
    let listeners = [old];
    let ops = plan(&listeners, &wanted, &["tg-80", "tg-8080"]);
    assert_eq!(
        ops,
        [
            ListenerOp::Create {
                port: &moved,
                target_group: "tg-8080"
            },
            ListenerOp::Delete {
                listener: &listeners[0]
            },
            ListenerOp::DeleteTargetGroup { arn: "tg-80" },
        ]
    );
}

/// A listener as the provider's create or modify leaves it.
fn made(port: &PortMapping, tg: &str) -> Listener {
    Listener::builder()
        .port(port.port)
        .protocol(port.listener_protocol.clone())
        .default_actions(forward(tg))
        .set_certificates(certificates(port))
        .set_ssl_policy(port.ssl_policy.clone())
        .build()
}

/// The listeners and target groups once `ops` are carried out.
fn carried_out(
    listeners: &[Listener],
    groups: &[String],
    ops: &[ListenerOp<'_>],
) -> (Vec<Listener>, Vec<String>) {
    let mut out = listeners.to_vec();
    let mut groups = groups.to_vec();
    for op in ops {
        match *op {
            ListenerOp::Create { port, target_group } => out.push(made(port, target_group)),
            ListenerOp::Modify {
                listener,
                port,
                target_group,
            } => {
                let at = out.iter().position(|l| l == listener).expect("still there");
                out[at] = made(port, target_group);
            }
            ListenerOp::Delete { listener } => out.retain(|l| l != listener),
            ListenerOp::DeleteTargetGroup { arn } => groups.retain(|g| g != arn),
        }
    }
    (out, groups)
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    const PORTS: [i32; 4] = [80, 443, 8080, 9000];
    const GROUPS: [&str; 3] = ["tg-0", "tg-1", "tg-2"];

    fn mapping() -> impl Strategy<Value = (PortMapping, String)> {
        (
            prop_oneof![
                Just(ProtocolEnum::Tcp),
                Just(ProtocolEnum::Udp),
                Just(ProtocolEnum::Tls)
            ],
            prop::option::of(prop_oneof![Just("arn:cert-a"), Just("arn:cert-b")]),
            prop::option::of(Just(POLICY)),
            0..GROUPS.len(),
        )
            .prop_map(|(protocol, cert, policy, tg)| {
                let tls = protocol == ProtocolEnum::Tls;
                let p = port(protocol, cert.filter(|_| tls), policy.filter(|_| tls));
                (p, GROUPS[tg].to_owned())
            })
    }

    /// Distinct ports, each with what it asks.
    fn ports() -> impl Strategy<Value = Vec<(PortMapping, String)>> {
        prop::collection::vec(mapping(), PORTS.len()).prop_flat_map(|all| {
            prop::sample::subsequence((0..PORTS.len()).collect::<Vec<_>>(), 0..=PORTS.len())
                .prop_map(move |chosen| {
                    chosen
                        .into_iter()
                        .map(|i| {
                            let (mut p, tg) = all[i].clone();
                            p.port = PORTS[i];
                            (p, tg)
                        })
                        .collect()
                })
        })
    }

    fn refs(ports: &[(PortMapping, String)]) -> Vec<(&PortMapping, String)> {
        ports.iter().map(|(p, tg)| (p, tg.clone())).collect()
    }

    proptest! {
        #[test]
        fn carried_out_the_plan_leaves_one_matching_listener_per_port_and_nothing_to_plan(
            have in ports(),
            want in ports(),
            owned_mask in prop::collection::vec(any::<bool>(), GROUPS.len()),
        ) {
            let listeners: Vec<Listener> = have.iter().map(|(p, tg)| made(p, tg)).collect();
            let groups: Vec<String> = GROUPS.iter().map(|g| (*g).to_owned()).collect();
            let owned: Vec<&str> = GROUPS
                .iter()
                .zip(&owned_mask)
                .filter_map(|(g, owned)| owned.then_some(*g))
                .collect();
            let wanted = refs(&want);
            let ops = plan(&listeners, &wanted, &owned);
            let (after, groups_after) = carried_out(&listeners, &groups, &ops);

            for (port, tg) in &want {
                let on: Vec<&Listener> =
                    after.iter().filter(|l| l.port() == Some(port.port)).collect();
                prop_assert_eq!(on.len(), 1, "one listener on {}", port.port);
                prop_assert!(listener_matches(on[0], port, tg));
            }
            prop_assert_eq!(after.len(), want.len(), "no listener on a dropped port");
            for group in &GROUPS {
                let deleted = !groups_after.iter().any(|g| g == group);
                let should = owned.contains(group) && !want.iter().any(|(_, tg)| tg == group);
                prop_assert_eq!(deleted, should, "{} deleted", group);
            }
            let owned_after: Vec<&str> = owned
                .iter()
                .copied()
                .filter(|g| groups_after.iter().any(|a| a == g))
                .collect();
            prop_assert_eq!(plan(&after, &wanted, &owned_after), vec![]);

            // Listeners are made before any goes, and groups go last.
            let rank = |op: &ListenerOp<'_>| match op {
                ListenerOp::Create { .. } | ListenerOp::Modify { .. } => 0,
                ListenerOp::Delete { .. } => 1,
                ListenerOp::DeleteTargetGroup { .. } => 2,
            };
            prop_assert!(ops.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])));
        }

        #[test]
        fn listeners_that_already_do_what_their_ports_ask_need_nothing(have in ports()) {
            let listeners: Vec<Listener> = have.iter().map(|(p, tg)| made(p, tg)).collect();
            let wanted = refs(&have);
            let owned: Vec<&str> = have.iter().map(|(_, tg)| tg.as_str()).collect();
            prop_assert_eq!(plan(&listeners, &wanted, &owned), vec![]);
        }
    }
}
