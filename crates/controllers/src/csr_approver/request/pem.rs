//! The one PEM block of a certificate request, read so strictly that Go's
//! `encoding/pem` (what kube-apiserver and the kubelet-serving signer read
//! the request with) cannot find a different one in the same bytes.
//!
//! Go's `pem.Decode` skips a block whose END line does not name its BEGIN
//! line's type and takes the next one, ignores text before and after the
//! block, reads `Key: value` headers and drops spaces and tabs from the
//! body. A reader that stops at the first `-----END ` line judges a block
//! Go never signs. So anything but exactly one block, alone, is refused
//! here rather than interpreted.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The only block type a kubelet's certificate request may have.
const LABEL: &str = "CERTIFICATE REQUEST";
/// The largest `spec.request` read: a kubelet's request is about a
/// kilobyte; a request this large is not one.
pub(crate) const MAX_LEN: usize = 64 * 1024;

/// The DER bytes of the single `CERTIFICATE REQUEST` block that `input`
/// must consist of.
///
/// # Guarantees
/// Accepted only when `input`, less leading and trailing ASCII whitespace,
/// is exactly: `-----BEGIN CERTIFICATE REQUEST-----`, then lines of
/// standard base64 (padded, no headers, no spaces), then `-----END
/// CERTIFICATE REQUEST-----`, lines ending in LF or CRLF. Go's
/// `pem.Decode` reads the same block and the same bytes from such input.
///
/// # Errors
/// What is wrong with it, in a few words.
pub(crate) fn single_block(input: &[u8]) -> Result<Vec<u8>, String> {
    if input.len() > MAX_LEN {
        return Err(format!(
            "{} bytes, more than the {MAX_LEN} a kubelet's request needs",
            input.len()
        ));
    }
    let text = std::str::from_utf8(input.trim_ascii())
        .ok()
        .filter(|text| text.is_ascii())
        .ok_or("not PEM: it holds bytes that are not ASCII")?;
    let begin = format!("-----BEGIN {LABEL}-----");
    let end = format!("-----END {LABEL}-----");
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    match lines.next() {
        Some(first) if first == begin => {}
        Some(first) if first.starts_with("-----BEGIN ") => {
            return Err(format!(
                "a PEM block that does not begin with {begin:?}: {:?}",
                cut(first)
            ));
        }
        _ => return Err(format!("not PEM: it does not start with {begin:?}")),
    }
    let mut body = String::new();
    let mut ended = false;
    for line in lines {
        if ended {
            return Err(format!(
                "text after the PEM block's END line: {:?}; Go would read a request there",
                cut(line)
            ));
        }
        if line == end {
            ended = true;
        } else if line.starts_with("-----") {
            return Err(format!(
                "a PEM line {:?} where base64 or {end:?} belongs; Go would skip this block",
                cut(line)
            ));
        } else if line.contains(':') {
            return Err("a PEM header: a certificate request has none".to_owned());
        } else if let Some(bad) = line
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
        {
            return Err(format!("the PEM body holds {bad:?}, which is not base64"));
        } else {
            body.push_str(line);
        }
    }
    if !ended {
        return Err(format!("the PEM block has no {end:?} line"));
    }
    let der = STANDARD
        .decode(body.as_bytes())
        .map_err(|e| format!("the PEM body is not standard base64: {e}"))?;
    if der.is_empty() {
        return Err("the PEM block is empty".to_owned());
    }
    Ok(der)
}

/// `line`, cut to 64 characters for a message.
fn cut(line: &str) -> String {
    line.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "MIIBAA==";

    fn block(label: &str, end: &str, body: &str) -> String {
        format!("-----BEGIN {label}-----\n{body}\n-----END {end}-----\n")
    }

    #[test]
    fn one_block_alone_is_read() {
        let pem = block(LABEL, LABEL, BODY);
        assert_eq!(
            single_block(pem.as_bytes()),
            Ok(vec![0x30, 0x82, 0x01, 0x00])
        );
        let crlf = format!("\r\n  {}\r\n\n", pem.replace('\n', "\r\n"));
        assert_eq!(
            single_block(crlf.as_bytes()),
            Ok(vec![0x30, 0x82, 0x01, 0x00])
        );
    }

    #[test]
    fn a_block_whose_end_line_names_another_type_is_refused() {
        // The smuggle: Go skips this block (its END does not match) and
        // reads the next one.
        let smuggled = format!("{}{}", block(LABEL, "X", BODY), block(LABEL, LABEL, "MIIC"));
        let err = single_block(smuggled.as_bytes()).expect_err("refused");
        assert!(err.contains("-----END X-----"), "{err}");
    }

    #[test]
    fn anything_beside_the_block_is_refused() {
        let pem = block(LABEL, LABEL, BODY);
        for (input, says) in [
            (format!("{pem}{pem}"), "after the PEM block"),
            (format!("hello\n{pem}"), "does not start with"),
            (format!("{pem}trailer"), "after the PEM block"),
            (
                block("CERTIFICATE", "CERTIFICATE", BODY),
                "does not begin with",
            ),
            (
                block(LABEL, LABEL, &format!("Proc-Type: 4\n\n{BODY}")),
                "header",
            ),
            (block(LABEL, LABEL, "MII BAA=="), "not base64"),
            (block(LABEL, LABEL, "MIIBAA="), "not standard base64"),
            (block(LABEL, LABEL, ""), "empty"),
            (
                pem.replace("-----END CERTIFICATE REQUEST-----\n", ""),
                "no ",
            ),
            (format!("{pem}\u{e9}"), "not ASCII"),
        ] {
            let err = single_block(input.as_bytes()).expect_err(&input);
            assert!(err.contains(says), "{input:?}: {err}");
        }
    }

    #[test]
    fn an_oversized_request_is_refused_before_it_is_read() {
        let big = "A".repeat(MAX_LEN + 1);
        assert!(single_block(big.as_bytes()).is_err_and(|e| e.contains("more than")));
    }
}
