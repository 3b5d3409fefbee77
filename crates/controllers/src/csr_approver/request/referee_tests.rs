//! The approver reads what Go signs, or denies: each request of a crafted
//! corpus, and thousands of mutants of well-formed ones, read by [`parse`]
//! and by Go itself (test-support's `CsrReferee`: `encoding/pem` and
//! `crypto/x509`, as kube-apiserver and the kubelet-serving signer read
//! `spec.request`). Wherever we would go on to judge a request's addresses,
//! Go must have read the same subject and the same alternative names.

use ccm_test_support::csr_craft::{
    self as craft, BASIC_CONSTRAINTS, EXTENSION_REQUEST, Info, SUBJECT_ALT_NAME, dns, extension,
    extension_request, ip, oid, pem, san, sequence, set, tlv,
};
use ccm_test_support::csr_referee::{CsrReferee, GoReading, OurReading};

use super::{Requested, parse};
use crate::csr_approver::rules;

/// What the API server records for a request made by node `a`.
fn requester() -> (Vec<String>, Vec<String>) {
    (
        vec!["system:nodes".to_owned()],
        vec!["digital signature".to_owned(), "server auth".to_owned()],
    )
}

/// Whether the approver would go on to check `requested`'s addresses with
/// the cloud: every rule but the cloud's passes.
fn judged(requested: &Requested) -> bool {
    let (groups, usages) = requester();
    let request = rules::Request {
        username: "system:node:a",
        groups: &groups,
        usages: &usages,
    };
    rules::node_of(request, Ok(requested)).is_ok()
}

/// Compares our reading of `bytes` with Go's; answers our reading.
///
/// # Panics
/// When we would judge a request Go reads otherwise.
fn compare(
    referee: &mut CsrReferee,
    case: &str,
    bytes: &[u8],
) -> (Result<Requested, String>, GoReading) {
    let go = referee
        .read(bytes)
        .unwrap_or_else(|e| panic!("the referee on {case}: {e:#}"));
    let ours = parse(bytes);
    if let Ok(requested) = &ours
        && judged(requested)
    {
        let ips: Vec<String> = requested
            .ip_addresses
            .iter()
            .map(ToString::to_string)
            .collect();
        let reading = OurReading {
            common_names: &requested.common_names,
            organizations: &requested.organizations,
            dns_names: &requested.dns_names,
            ip_addresses: &ips,
            emails: &requested.emails,
            uris: &requested.uris,
        };
        if let Err(diff) = go.agrees_with(reading) {
            panic!(
                "{case}: we would judge this request, and Go reads it otherwise ({diff})\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    (ours, go)
}

fn own_names() -> Vec<Vec<u8>> {
    vec![dns("a.example"), ip(&[10, 0, 0, 7])]
}

fn evil_names() -> Vec<Vec<u8>> {
    vec![dns("kubernetes.default.svc"), ip(&[10, 0, 0, 1])]
}

/// A kubelet request for node `a` with `attributes`.
fn with_attributes(attributes: Vec<Vec<u8>>) -> String {
    let info = Info {
        attributes,
        ..Info::kubelet("a", &[])
    };
    pem(&info.signed())
}

/// `der` with its outermost length in a form DER forbids.
fn long_form_length(der: &[u8]) -> Vec<u8> {
    let (header, contents) = if der[1] & 0x80 == 0 {
        (2, &der[2..])
    } else {
        let octets = usize::from(der[1] & 0x7f);
        (2 + octets, &der[2 + octets..])
    };
    assert!(header >= 2);
    let len = u16::try_from(contents.len()).expect("a small request");
    let mut out = vec![der[0], 0x83, 0];
    out.extend(len.to_be_bytes());
    out.extend_from_slice(contents);
    out
}

/// Every crafted request: its name, its bytes, and whether we read it.
fn corpus() -> Vec<(&'static str, String, bool)> {
    let own = Info::kubelet("a", &own_names());
    let evil = Info::kubelet("a", &evil_names());
    let own_pem = pem(&own.signed());
    let evil_pem = pem(&evil.signed());
    let smuggled = format!(
        "{}{evil_pem}",
        own_pem.replace("-----END CERTIFICATE REQUEST-----", "-----END X-----")
    );
    let key = rcgen::KeyPair::generate().expect("a key");
    let other = rcgen::KeyPair::generate().expect("a key");
    let mut two_cns = Info::kubelet("a", &own_names());
    two_cns.subject = sequence(&[
        craft::name_attribute(craft::COMMON_NAME, "system:node:a"),
        craft::name_attribute(craft::COMMON_NAME, "system:node:b"),
        craft::name_attribute(craft::ORGANIZATION, "system:nodes"),
    ]);
    let mut printable = Info::kubelet("a", &own_names());
    printable.subject = sequence(&[
        set(&[sequence(&[
            oid(craft::COMMON_NAME),
            tlv(0x13, b"system:node:a"),
        ])]),
        craft::name_attribute(craft::ORGANIZATION, "system:nodes"),
    ]);
    let challenge = sequence(&[
        oid(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x07]),
        set(&[tlv(0x0c, b"secret")]),
    ]);
    let many: Vec<Vec<u8>> = (0..3000).map(|i| dns(&format!("n{i}.a.example"))).collect();
    vec![
        ("well-formed", own_pem.clone(), true),
        (
            "made by rcgen",
            ccm_test_support::kubelet_serving_request(
                "system:node:a",
                &["a.example", "10.0.0.7", "fd00::1"],
            ),
            true,
        ),
        ("a CN as PrintableString", pem(&printable.signed()), true),
        (
            "a challengePassword beside the extensionRequest",
            with_attributes(vec![challenge, extension_request(&[san(&own_names())])]),
            true,
        ),
        (
            "an IPv4-mapped IPv6 address",
            pem(&Info::kubelet(
                "a",
                &[ip(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7])],
            )
            .signed()),
            true,
        ),
        (
            "PEM END label mismatch, a second block after",
            smuggled,
            false,
        ),
        (
            "a trailing PEM block",
            format!("{own_pem}{evil_pem}"),
            false,
        ),
        (
            "a leading PEM block of another type",
            format!(
                "{}{own_pem}",
                craft::pem_block("CERTIFICATE", &evil.signed())
            ),
            false,
        ),
        ("text before the block", format!("junk\n{own_pem}"), false),
        (
            "PEM headers",
            own_pem.replacen(
                '\n',
                "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n",
                1,
            ),
            false,
        ),
        (
            "BER length on the outer SEQUENCE",
            pem(&long_form_length(&own.signed())),
            false,
        ),
        (
            "BER length inside the signed info",
            pem(&craft::sign(&long_form_length(&own.der(&key)), &key)),
            false,
        ),
        (
            "two extensionRequest attributes, a SAN in each",
            with_attributes(vec![
                extension_request(&[san(&own_names())]),
                extension_request(&[san(&evil_names())]),
            ]),
            false,
        ),
        (
            "two extensionRequest attributes, different extensions",
            with_attributes(vec![
                extension_request(&[san(&own_names())]),
                extension_request(&[extension(BASIC_CONSTRAINTS, &sequence(&[]))]),
            ]),
            false,
        ),
        (
            "an extensionRequest SET with two values",
            with_attributes(vec![sequence(&[
                oid(EXTENSION_REQUEST),
                set(&[
                    sequence(&[san(&own_names())]),
                    sequence(&[san(&evil_names())]),
                ]),
            ])]),
            false,
        ),
        (
            "an extensionRequest whose values are a SEQUENCE, then a real one",
            with_attributes(vec![
                sequence(&[
                    oid(EXTENSION_REQUEST),
                    sequence(&[sequence(&[san(&evil_names())])]),
                ]),
                extension_request(&[san(&own_names())]),
            ]),
            false,
        ),
        (
            "an extensionRequest with an empty SET",
            with_attributes(vec![sequence(&[oid(EXTENSION_REQUEST), set(&[])])]),
            false,
        ),
        (
            "two subjectAltName extensions",
            with_attributes(vec![extension_request(&[
                san(&own_names()),
                san(&evil_names()),
            ])]),
            false,
        ),
        (
            "an unparseable subjectAltName",
            with_attributes(vec![extension_request(&[extension(
                SUBJECT_ALT_NAME,
                &[0x30, 0x03, 0x82, 0x05, 0x41],
            )])]),
            false,
        ),
        (
            "a subjectAltName with bytes after its SEQUENCE",
            with_attributes(vec![extension_request(&[extension(
                SUBJECT_ALT_NAME,
                &[sequence(&own_names()), vec![0x05, 0x00]].concat(),
            )])]),
            false,
        ),
        (
            "an IP address of five bytes",
            pem(&Info::kubelet("a", &[ip(&[10, 0, 0, 7, 1])]).signed()),
            false,
        ),
        (
            "a DNS name that is not ASCII",
            pem(&Info::kubelet("a", &[tlv(0x82, "\u{e4}.example".as_bytes())]).signed()),
            false,
        ),
        (
            "a critical flag of 0x01",
            with_attributes(vec![extension_request(&[sequence(&[
                oid(SUBJECT_ALT_NAME),
                tlv(0x01, &[0x01]),
                tlv(0x04, &sequence(&own_names())),
            ])])]),
            false,
        ),
        ("two common names", pem(&two_cns.signed()), false),
        ("oversized", pem(&Info::kubelet("a", &many).signed()), false),
        (
            "signed by another key",
            pem(&craft::sign(&own.der(&key), &other)),
            false,
        ),
    ]
}

#[test]
fn every_crafted_request_is_read_as_go_reads_it_or_refused() {
    let mut referee = CsrReferee::start().expect("the Go referee builds and starts");
    for (case, request, we_read_it) in corpus() {
        let (ours, go) = compare(&mut referee, case, request.as_bytes());
        assert_eq!(ours.is_ok(), we_read_it, "{case}: {ours:?}");
        if we_read_it {
            assert!(go.ok, "{case}: Go reads it too: {}", go.error);
        }
    }
}

#[test]
fn the_smuggled_request_is_one_go_would_sign_for_another_name() {
    // Not a strawman: Go reads the second block of the smuggle.
    let mut referee = CsrReferee::start().expect("the Go referee builds and starts");
    let (_, smuggled, _) = corpus()
        .into_iter()
        .find(|(case, _, _)| case.starts_with("PEM END label mismatch"))
        .expect("in the corpus");
    let go = referee.read(smuggled.as_bytes()).expect("read");
    assert_eq!(go.dns_names, ["kubernetes.default.svc"], "{go:?}");
    let err = parse(smuggled.as_bytes()).expect_err("refused");
    assert!(err.contains("END X"), "{err}");
}

/// One random edit of `bytes`.
fn mutate(rng: &mut fastrand::Rng, bytes: &mut Vec<u8>, alphabet: &[u8]) {
    let at = rng.usize(..=bytes.len());
    let pick = |rng: &mut fastrand::Rng| {
        if alphabet.is_empty() {
            rng.u8(..)
        } else {
            alphabet[rng.usize(..alphabet.len())]
        }
    };
    match rng.u8(..4) {
        0 if at < bytes.len() => bytes[at] = pick(rng),
        1 => bytes.insert(at, pick(rng)),
        2 if at < bytes.len() => {
            bytes.remove(at);
        }
        _ => {
            let end = rng.usize(at..=bytes.len().min(at + 16));
            let copy = bytes[at..end].to_vec();
            let to = rng.usize(..=bytes.len());
            bytes.splice(to..to, copy);
        }
    }
}

#[test]
fn mutants_of_well_formed_requests_are_read_as_go_reads_them_or_refused() {
    let mut referee = CsrReferee::start().expect("the Go referee builds and starts");
    let mut rng = fastrand::Rng::with_seed(0x5eed_c5a1);
    let key = rcgen::KeyPair::generate().expect("a key");
    let seeds = [
        Info::kubelet("a", &own_names()),
        Info::kubelet(
            "a",
            &[
                dns("a.example"),
                dns("b.a.example"),
                ip(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            ],
        ),
    ];
    let (mut judged_mutants, mut total) = (0, 0);
    // The signed info, mutated and then signed: the signature verifies
    // whatever the edit did, so the parsers meet every structure.
    for round in 0..3000 {
        let mut info = seeds[round % seeds.len()].der(&key);
        for _ in 0..=rng.usize(..3) {
            mutate(&mut rng, &mut info, &[]);
        }
        let request = pem(&craft::sign(&info, &key));
        let (ours, _) = compare(
            &mut referee,
            "a mutant of the signed info",
            request.as_bytes(),
        );
        total += 1;
        judged_mutants += usize::from(ours.as_ref().is_ok_and(judged));
    }
    // The PEM text, mutated with PEM's own characters.
    let text = pem(&seeds[0].signed());
    let alphabet = b"-\n\r :ABCDEFGHIJKLMNOPQRSTUVWXYZ=+/ X";
    for _ in 0..600 {
        let mut bytes = text.clone().into_bytes();
        for _ in 0..=rng.usize(..3) {
            mutate(&mut rng, &mut bytes, alphabet);
        }
        let (ours, _) = compare(&mut referee, "a mutant of the PEM", &bytes);
        total += 1;
        judged_mutants += usize::from(ours.as_ref().is_ok_and(judged));
    }
    println!("{total} mutants, {judged_mutants} read and judged by us, each as Go reads it");
    assert!(
        judged_mutants >= 10,
        "too few mutants survive to be compared ({judged_mutants} of {total}): the test would prove little"
    );
}
