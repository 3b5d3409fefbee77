//! A strict reader of DER's tag-length-value framing: definite, minimal
//! lengths, low tag numbers, nothing left over. x509-parser reads some BER
//! that Go's `encoding/asn1` refuses or reads otherwise; a request that
//! passes [`check_canonical`] has one framing only, so both parsers walk
//! the same tree.

/// How deep a request's structures may nest (a certificate request's are
/// under ten levels).
const MAX_DEPTH: usize = 32;

/// The constructed bit of an identifier octet.
const CONSTRUCTED: u8 = 0x20;
/// The universal BOOLEAN tag.
const BOOLEAN: u8 = 0x01;
/// The universal INTEGER tag.
const INTEGER: u8 = 0x02;
/// The universal SEQUENCE tag, constructed.
pub(crate) const SEQUENCE: u8 = 0x30;
/// The universal SET tag, constructed.
pub(crate) const SET: u8 = 0x31;

/// One element: its identifier octet and its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Element<'a> {
    pub(crate) tag: u8,
    pub(crate) contents: &'a [u8],
}

/// Reads the first element of `input`; answers it and what follows.
///
/// # Errors
/// A high tag number, an indefinite or non-minimal length, or a length
/// past the end of the input.
pub(crate) fn read(input: &[u8]) -> Result<(Element<'_>, &[u8]), String> {
    let (&tag, rest) = input.split_first().ok_or("a truncated ASN.1 element")?;
    if tag & 0x1f == 0x1f {
        return Err("an ASN.1 tag number above 30".to_owned());
    }
    let (&first, rest) = rest.split_first().ok_or("a truncated ASN.1 length")?;
    let (len, rest) = match first {
        0x80 => return Err("an indefinite ASN.1 length (BER, not DER)".to_owned()),
        short if short < 0x80 => (usize::from(short), rest),
        long => {
            let octets = usize::from(long & 0x7f);
            if octets > size_of::<usize>() || octets > rest.len() {
                return Err("an ASN.1 length too long to be real".to_owned());
            }
            let (be, rest) = rest.split_at(octets);
            if be.first() == Some(&0) {
                return Err("an ASN.1 length with a leading zero (BER, not DER)".to_owned());
            }
            let len = be
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            if len < 0x80 {
                return Err("a long-form ASN.1 length under 128 (BER, not DER)".to_owned());
            }
            (len, rest)
        }
    };
    if len > rest.len() {
        return Err("an ASN.1 length past the end of its input".to_owned());
    }
    let (contents, rest) = rest.split_at(len);
    Ok((Element { tag, contents }, rest))
}

/// Every element of `input` in order; it must be used up exactly.
///
/// # Errors
/// As [`read`].
pub(crate) fn elements(mut input: &[u8]) -> Result<Vec<Element<'_>>, String> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (element, rest) = read(input)?;
        out.push(element);
        input = rest;
    }
    Ok(out)
}

/// Whether `input` is exactly one element framed as DER frames it, all the
/// way down its constructed elements.
///
/// # Errors
/// The first framing that is not DER's, or bytes after the element.
pub(crate) fn check_canonical(input: &[u8]) -> Result<(), String> {
    let (element, rest) = read(input)?;
    if !rest.is_empty() {
        return Err(format!(
            "{} bytes after the certificate request's ASN.1",
            rest.len()
        ));
    }
    check_element(element, 0)
}

fn check_element(element: Element<'_>, depth: usize) -> Result<(), String> {
    if element.tag & CONSTRUCTED == 0 {
        return check_primitive(element);
    }
    if depth >= MAX_DEPTH {
        return Err(format!("ASN.1 nested deeper than {MAX_DEPTH} levels"));
    }
    elements(element.contents)?
        .into_iter()
        .try_for_each(|child| check_element(child, depth + 1))
}

/// DER's rules for the primitives Go's `encoding/asn1` holds to: a
/// BOOLEAN is one octet, 0x00 or 0xFF; an INTEGER is minimally encoded.
fn check_primitive(element: Element<'_>) -> Result<(), String> {
    match (element.tag, element.contents) {
        (BOOLEAN, [0x00 | 0xff]) => Ok(()),
        (BOOLEAN, _) => Err("an ASN.1 BOOLEAN other than 0x00 or 0xFF (BER, not DER)".to_owned()),
        (INTEGER, []) => Err("an empty ASN.1 INTEGER".to_owned()),
        (INTEGER, [0x00, next, ..]) if next & 0x80 == 0 => {
            Err("an ASN.1 INTEGER with a needless leading 0x00 (BER, not DER)".to_owned())
        }
        (INTEGER, [0xff, next, ..]) if next & 0x80 != 0 => {
            Err("an ASN.1 INTEGER with a needless leading 0xFF (BER, not DER)".to_owned())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_framing_is_read_and_ber_framing_refused() {
        // SEQUENCE { INTEGER 1, SET { NULL } }
        let der = [0x30, 0x07, 0x02, 0x01, 0x01, 0x31, 0x02, 0x05, 0x00];
        assert_eq!(check_canonical(&der), Ok(()));
        let (seq, rest) = read(&der).expect("reads");
        assert!(rest.is_empty());
        assert_eq!(seq.tag, SEQUENCE);
        assert_eq!(elements(seq.contents).expect("children").len(), 2);
        for (ber, says) in [
            (vec![0x30, 0x80, 0x05, 0x00, 0x00, 0x00], "indefinite"),
            (vec![0x30, 0x81, 0x02, 0x05, 0x00], "under 128"),
            (vec![0x30, 0x82, 0x00, 0x02, 0x05, 0x00], "leading zero"),
            (vec![0x30, 0x03, 0x05, 0x00], "past the end"),
            (vec![0x30, 0x02, 0x05, 0x00, 0x00], "after"),
            (vec![0x3f, 0x01, 0x00], "tag number"),
            (vec![0x30, 0x03, 0x31, 0x81, 0x05], "under 128"),
            (vec![0x30, 0x03, 0x31, 0x81, 0x00], "leading zero"),
            (vec![0x30, 0x89, 1, 1, 1, 1, 1, 1, 1, 1, 1], "too long"),
            (vec![0x30, 0x03, 0x01, 0x01, 0x01], "BOOLEAN"),
            (vec![0x30, 0x04, 0x02, 0x02, 0x00, 0x01], "leading 0x00"),
            (vec![0x30, 0x04, 0x02, 0x02, 0xff, 0x80], "leading 0xFF"),
            (vec![0x30, 0x02, 0x02, 0x00], "empty"),
        ] {
            let err = check_canonical(&ber).expect_err(says);
            assert!(err.contains(says), "{ber:02x?}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_exhausting_the_stack() {
        let mut nested = vec![0x05, 0x00];
        for _ in 0..40 {
            let mut outer = vec![SEQUENCE];
            let len = nested.len();
            if len < 0x80 {
                outer.push(u8::try_from(len).expect("short"));
            } else {
                outer.extend([0x81, u8::try_from(len).expect("one octet")]);
            }
            outer.extend(nested);
            nested = outer;
        }
        let err = check_canonical(&nested).expect_err("too deep");
        assert!(err.contains("deeper"), "{err}");
    }
}
