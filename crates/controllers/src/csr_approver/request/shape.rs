//! The shape of a CertificationRequestInfo, checked on its DER before
//! x509-parser reads it: each element where RFC 2986 puts it, with the tag
//! Go's `encoding/asn1` insists on. x509-parser is lenient about some tags
//! (an extension whose type is not tagged OBJECT IDENTIFIER still reads as
//! that type); Go refuses the whole request. A request of another shape is
//! refused here, so what x509-parser reads is what Go reads.

use super::der::{self, Element, SEQUENCE, SET};

/// The universal INTEGER tag.
const INTEGER: u8 = 0x02;
/// The universal BOOLEAN tag.
const BOOLEAN: u8 = 0x01;
/// The universal UTF8String tag.
const UTF8_STRING: u8 = 0x0c;
/// The universal PrintableString tag.
const PRINTABLE_STRING: u8 = 0x13;
/// The universal IA5String tag.
const IA5_STRING: u8 = 0x16;
/// The universal BIT STRING tag.
const BIT_STRING: u8 = 0x03;
/// The universal OCTET STRING tag.
const OCTET_STRING: u8 = 0x04;
/// The universal OBJECT IDENTIFIER tag.
const OBJECT_IDENTIFIER: u8 = 0x06;
/// The `[0]` tag of the request's attributes.
const ATTRIBUTES: u8 = 0xa0;
/// The DER contents of id-ecPublicKey, 1.2.840.10045.2.1.
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// The DER contents of the extensionRequest attribute's type,
/// 1.2.840.113549.1.9.14.
const EXTENSION_REQUEST: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x0e];

/// Checks `info` (the CertificationRequestInfo's DER) and answers how many
/// extensions its one extensionRequest attribute holds (`None` without
/// one).
///
/// # Guarantees
/// `Ok` only when: version, subject, key and `[0]` attributes, in order
/// and nothing else; a subject of SETs of (OBJECT IDENTIFIER, value)
/// SEQUENCEs; at most one extensionRequest attribute, exactly a type and a
/// SET of one SEQUENCE of extensions; each extension an OBJECT IDENTIFIER,
/// an optional BOOLEAN and an OCTET STRING.
///
/// # Errors
/// The first element out of place.
pub(crate) fn check_info(info: &[u8]) -> Result<Option<usize>, String> {
    let (info, _) = der::read(info)?;
    let fields = der::elements(info.contents)?;
    let [version, subject, key, attributes] = fields.as_slice() else {
        return Err(format!(
            "a request info of {} parts, not version, subject, key and attributes",
            fields.len()
        ));
    };
    expect(version, INTEGER, "the version")?;
    expect(subject, SEQUENCE, "the subject")?;
    check_key(key)?;
    expect(attributes, ATTRIBUTES, "the attributes")?;
    for rdn in der::elements(subject.contents)? {
        expect(&rdn, SET, "a subject's relative name")?;
        for pair in der::elements(rdn.contents)? {
            expect(&pair, SEQUENCE, "a subject's attribute")?;
            match der::elements(pair.contents)?.as_slice() {
                [kind, value] => {
                    expect(kind, OBJECT_IDENTIFIER, "a subject attribute's type")?;
                    check_text(value)?;
                }
                _ => return Err("a subject attribute of other than a type and a value".to_owned()),
            }
        }
    }
    let mut extension_count = None;
    for attribute in der::elements(attributes.contents)? {
        expect(&attribute, SEQUENCE, "an attribute")?;
        let parts = der::elements(attribute.contents)?;
        let Some(kind) = parts.first() else {
            return Err("an empty attribute".to_owned());
        };
        expect(kind, OBJECT_IDENTIFIER, "an attribute's type")?;
        if kind.contents != EXTENSION_REQUEST {
            continue;
        }
        if extension_count.is_some() {
            return Err("more than one extensionRequest attribute".to_owned());
        }
        let [_, values] = parts.as_slice() else {
            return Err("an extensionRequest attribute of more than a type and values".to_owned());
        };
        expect(values, SET, "an extensionRequest attribute's values")?;
        let values = der::elements(values.contents)?;
        let [extensions] = values.as_slice() else {
            return Err(format!(
                "an extensionRequest attribute with {} values, not one",
                values.len()
            ));
        };
        expect(extensions, SEQUENCE, "the requested extensions")?;
        let extensions = der::elements(extensions.contents)?;
        for extension in &extensions {
            check_extension(extension)?;
        }
        extension_count = Some(extensions.len());
    }
    Ok(extension_count)
}

/// Checks the whole request's DER: the info, an algorithm and a BIT
/// STRING of signature.
///
/// # Errors
/// The first element out of place.
pub(crate) fn check_request(request: &[u8]) -> Result<(), String> {
    let (request, _) = der::read(request)?;
    expect(&request, SEQUENCE, "the request")?;
    let parts = der::elements(request.contents)?;
    let [info, algorithm, signature] = parts.as_slice() else {
        return Err(format!(
            "a request of {} parts, not info, algorithm and signature",
            parts.len()
        ));
    };
    expect(info, SEQUENCE, "the request info")?;
    check_algorithm(algorithm, "the signature's algorithm")?;
    expect(signature, BIT_STRING, "the signature")
}

/// SubjectPublicKeyInfo: an algorithm and a BIT STRING; an elliptic
/// curve's key names its curve by OBJECT IDENTIFIER.
fn check_key(key: &Element<'_>) -> Result<(), String> {
    expect(key, SEQUENCE, "the public key")?;
    let parts = der::elements(key.contents)?;
    let [algorithm, bits] = parts.as_slice() else {
        return Err("a public key of other than an algorithm and a key".to_owned());
    };
    let kind = check_algorithm(algorithm, "the public key's algorithm")?;
    if kind.contents == EC_PUBLIC_KEY {
        match der::elements(algorithm.contents)?.as_slice() {
            [_, curve] => expect(curve, OBJECT_IDENTIFIER, "the key's curve")?,
            _ => return Err("an elliptic curve key without its curve".to_owned()),
        }
    }
    expect(bits, BIT_STRING, "the public key's bits")
}

/// AlgorithmIdentifier: an OBJECT IDENTIFIER and optional parameters;
/// answers the identifier.
fn check_algorithm<'a>(algorithm: &Element<'a>, what: &str) -> Result<Element<'a>, String> {
    expect(algorithm, SEQUENCE, what)?;
    match der::elements(algorithm.contents)?.as_slice() {
        [kind] | [kind, _] => {
            expect(kind, OBJECT_IDENTIFIER, what)?;
            Ok(*kind)
        }
        _ => Err(format!("{what} of other than an identifier and parameters")),
    }
}

/// A subject attribute's value: text of a kind Go and x509-parser read
/// alike. Go skips a value of any other type where x509-parser may read
/// it, and refuses a PrintableString outside its alphabet.
fn check_text(value: &Element<'_>) -> Result<(), String> {
    let printable = |c: &u8| c.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(c);
    let fits = match value.tag {
        UTF8_STRING => std::str::from_utf8(value.contents).is_ok(),
        PRINTABLE_STRING => value.contents.iter().all(printable),
        IA5_STRING => value.contents.is_ascii(),
        other => {
            return Err(format!(
                "a subject attribute's value tagged 0x{other:02x}, not UTF8String, PrintableString or IA5String"
            ));
        }
    };
    if fits {
        Ok(())
    } else {
        Err("a subject attribute's value outside its string type's alphabet".to_owned())
    }
}

fn check_extension(extension: &Element<'_>) -> Result<(), String> {
    expect(extension, SEQUENCE, "an extension")?;
    let parts = der::elements(extension.contents)?;
    let (kind, value) = match parts.as_slice() {
        [kind, value] => (kind, value),
        [kind, critical, value] => {
            expect(critical, BOOLEAN, "an extension's critical flag")?;
            (kind, value)
        }
        _ => return Err("an extension of other than a type, a flag and a value".to_owned()),
    };
    expect(kind, OBJECT_IDENTIFIER, "an extension's type")?;
    expect(value, OCTET_STRING, "an extension's value")
}

fn expect(element: &Element<'_>, tag: u8, what: &str) -> Result<(), String> {
    if element.tag == tag {
        Ok(())
    } else {
        Err(format!(
            "{what} tagged 0x{:02x}, not 0x{tag:02x}",
            element.tag
        ))
    }
}

#[cfg(test)]
mod tests {
    use ccm_test_support::csr_craft::{Info, dns, extension_request, oid, san, sequence, set, tlv};

    use super::*;

    fn info(attributes: Vec<Vec<u8>>) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().expect("a key");
        Info {
            attributes,
            ..Info::kubelet("a", &[])
        }
        .der(&key)
    }

    #[test]
    fn a_kubelets_request_info_has_the_shape() {
        let names = [dns("a.example")];
        assert_eq!(
            check_info(&info(vec![extension_request(&[san(&names)])])),
            Ok(Some(1))
        );
        assert_eq!(check_info(&info(vec![])), Ok(None));
    }

    #[test]
    fn an_element_out_of_place_is_named() {
        let names = sequence(&[dns("a.example")]);
        let badly_typed = sequence(&[tlv(0x07, &[0x55, 0x1d, 0x11]), tlv(0x04, &names)]);
        let err = check_info(&info(vec![extension_request(&[badly_typed])])).expect_err("refused");
        assert!(err.contains("an extension's type tagged 0x07"), "{err}");
        let two = vec![extension_request(&[]), extension_request(&[])];
        assert!(check_info(&info(two)).is_err_and(|e| e.contains("more than one")));
        let no_set = sequence(&[oid(EXTENSION_REQUEST), sequence(&[sequence(&[])])]);
        assert!(check_info(&info(vec![no_set])).is_err_and(|e| e.contains("values tagged")));
        let empty = sequence(&[oid(EXTENSION_REQUEST), set(&[])]);
        assert!(check_info(&info(vec![empty])).is_err_and(|e| e.contains("0 values")));
    }
}
