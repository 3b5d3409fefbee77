//! The classic ELB's listener changes, and the dry run's projection of
//! them.

use super::*;

fn wanted(port: i32, protocol: &'static str, cert: Option<&str>) -> ClassicListener {
    ClassicListener {
        port,
        instance_port: 30000 + port,
        protocol,
        instance_protocol: "TCP",
        certificate: cert.map(str::to_owned),
    }
}

fn actual(port: i32, protocol: &str, cert: Option<&str>) -> Listener {
    Listener::builder()
        .protocol(protocol)
        .load_balancer_port(port)
        .instance_protocol("tcp")
        .instance_port(30000 + port)
        .set_ssl_certificate_id(cert.map(str::to_owned))
        .build()
        .unwrap()
}

#[test]
fn listeners_that_agree_but_for_case_are_kept() {
    let want = [wanted(80, "TCP", None)];
    let (remove, add) = listener_changes(&[actual(80, "tcp", None)], &want);
    assert!(remove.is_empty() && add.is_empty(), "{remove:?} {add:?}");
}

#[test]
fn a_changed_listener_is_replaced_and_a_gone_port_removed() {
    let cert = "arn:aws:acm:us-east-1:123456789012:certificate/x";
    let want = [wanted(443, "SSL", Some(cert)), wanted(8080, "TCP", None)];
    let (remove, add) =
        listener_changes(&[actual(80, "TCP", None), actual(443, "TCP", None)], &want);
    assert_eq!(remove, vec![80, 443]);
    let ports: Vec<i32> = add.iter().map(|l| l.port).collect();
    assert_eq!(ports, vec![443, 8080]);
}

mod properties {
    use proptest::collection::btree_map;
    use proptest::prelude::*;

    use super::*;

    const PROTOCOLS: [&str; 4] = ["TCP", "SSL", "HTTP", "HTTPS"];

    /// Listeners on distinct ports, as an ELB holds them: (protocol,
    /// instance protocol, instance port offset, certificate) by port.
    fn listeners() -> impl Strategy<Value = Vec<ClassicListener>> {
        btree_map(
            prop::sample::select(vec![80, 443, 8080, 8443]),
            (0..4usize, 0..4usize, 0..2i32, prop::option::of(0..2u8)),
            0..4,
        )
        .prop_map(|by_port| {
            by_port
                .into_iter()
                .map(|(port, (p, ip, offset, cert))| ClassicListener {
                    port,
                    instance_port: 30000 + port + offset,
                    protocol: PROTOCOLS[p],
                    instance_protocol: PROTOCOLS[ip],
                    certificate: cert.map(|c| format!("arn:aws:acm:::certificate/{c}")),
                })
                .collect()
        })
    }

    /// An ELB with `actual`'s listeners, AWS spelling protocols in
    /// lower case where `lower`.
    fn elb(actual: &[ClassicListener], lower: bool) -> LoadBalancerDescription {
        let spelled = |p: &str| {
            if lower {
                p.to_lowercase()
            } else {
                p.to_owned()
            }
        };
        let mut lb = LoadBalancerDescription::builder();
        for l in actual {
            let listener = Listener::builder()
                .protocol(spelled(l.protocol))
                .load_balancer_port(l.port)
                .instance_protocol(spelled(l.instance_protocol))
                .instance_port(l.instance_port)
                .set_ssl_certificate_id(l.certificate.clone())
                .build()
                .unwrap();
            lb = lb.listener_descriptions(
                ListenerDescription::builder()
                    .listener(listener)
                    .policy_names("kept")
                    .build(),
            );
        }
        lb.build()
    }

    fn listeners_of(lb: &LoadBalancerDescription) -> Vec<Listener> {
        lb.listener_descriptions()
            .iter()
            .filter_map(|d| d.listener().cloned())
            .collect()
    }

    proptest! {
        /// Carried out, the changes leave the listeners wanted and no
        /// other, and planning again finds nothing to do.
        #[test]
        fn the_changes_carried_out_leave_what_is_wanted(
            actual in listeners(), wanted in listeners(), lower in any::<bool>(),
        ) {
            let lb = elb(&actual, lower);
            let after = with_listeners(lb, &wanted).unwrap();
            let now = listeners_of(&after);
            prop_assert_eq!(now.len(), wanted.len());
            for w in &wanted {
                prop_assert!(now.iter().any(|a| same_listener(a, w)), "{w:?} missing");
            }
            let (remove, add) = listener_changes(&now, &wanted);
            prop_assert!(remove.is_empty() && add.is_empty(), "{remove:?} {add:?}");
        }

        /// A listener that is already wanted is neither removed nor
        /// made again, and keeps its policies.
        #[test]
        fn a_wanted_listener_is_left_alone(
            actual in listeners(), wanted in listeners(), lower in any::<bool>(),
        ) {
            let lb = elb(&actual, lower);
            let (remove, add) = listener_changes(&listeners_of(&lb), &wanted);
            let after = with_listeners(lb.clone(), &wanted).unwrap();
            for a in listeners_of(&lb) {
                if wanted.iter().any(|w| same_listener(&a, w)) {
                    prop_assert!(!remove.contains(&a.load_balancer_port()));
                    prop_assert!(!add.iter().any(|w| w.port == a.load_balancer_port()));
                    let kept = after.listener_descriptions().iter().find(|d| {
                        d.listener().map(Listener::load_balancer_port)
                            == Some(a.load_balancer_port())
                    });
                    prop_assert_eq!(kept.map(ListenerDescription::policy_names), Some(&["kept".to_owned()][..]));
                }
            }
        }
    }
}

#[test]
fn the_projected_elb_keeps_a_kept_listeners_policies_and_gives_a_new_one_none() {
    let described = |l: Listener, policy: &str| {
        ListenerDescription::builder()
            .listener(l)
            .policy_names(policy)
            .build()
    };
    let lb = LoadBalancerDescription::builder()
        .listener_descriptions(described(actual(80, "TCP", None), "kept"))
        .listener_descriptions(described(actual(443, "TCP", None), "dropped"))
        .build();
    let want = [wanted(80, "TCP", None), wanted(8443, "TCP", None)];
    let projected = with_listeners(lb, &want).unwrap();
    let ports_and_policies: Vec<(i32, Vec<String>)> = projected
        .listener_descriptions()
        .iter()
        .map(|d| {
            let port = d.listener().map_or(0, Listener::load_balancer_port);
            (port, d.policy_names().to_vec())
        })
        .collect();
    assert_eq!(
        ports_and_policies,
        [(80, vec!["kept".to_owned()]), (8443, Vec::new())]
    );
}
