//! What a query-protocol request says, for the request fence: EC2 and
//! ELBv2 send every call as a form-encoded body,
//! `Action=CreateListener&Version=2015-12-01&Port=80&...`, so the body alone
//! tells the operation, whether it changes the cloud, and the arguments a
//! dry run's plan shows.

use ccm_cloud_provider::fence::Request;

/// The longest detail, in characters; a longer one is cut and ends in `…`.
const MAX_DETAIL: usize = 300;

/// Parameters never shown: the operation and API version (said elsewhere),
/// and query-string signing, which carries credentials. EC2 and ELBv2 sign
/// in headers, never in the body, but a plan must not show a key even if
/// that changes.
fn hidden(key: &str) -> bool {
    matches!(
        key,
        "Action" | "Version" | "AWSAccessKeyId" | "Signature" | "SecurityToken"
    ) || key.starts_with("X-Amz-")
}

/// A query-protocol request as it is described to the fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueryRequest {
    /// The `Action`: `CreateListener`, `DescribeInstances`.
    pub(crate) operation: String,
    /// The other parameters as `Key=value` words, lists shortened
    /// (`Tags.member.1.Key` reads `Tags.1.Key`), values with spaces quoted,
    /// at most [`MAX_DETAIL`] characters.
    pub(crate) detail: String,
}

impl QueryRequest {
    /// The request in `body`; `None` when it names no `Action` (not a
    /// query-protocol request).
    pub(crate) fn parse(body: &[u8]) -> Option<Self> {
        let body = String::from_utf8_lossy(body);
        let mut operation = None;
        let mut words = Vec::new();
        for pair in body.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (key, value) = (decode(key), decode(value));
            if key == "Action" {
                operation = Some(value);
            } else if !hidden(&key) {
                words.push(word(&key, &value));
            }
        }
        Some(Self {
            operation: operation.filter(|o| !o.is_empty())?,
            detail: cut(&words.join(" ")),
        })
    }

    /// Whether the request changes the cloud: everything but the
    /// `Describe*`, `Get*` and `List*` reads.
    pub(crate) fn mutates(&self) -> bool {
        !["Describe", "Get", "List"]
            .iter()
            .any(|read| self.operation.starts_with(read))
    }

    /// The description [`ccm_cloud_provider::fence::check_request`] takes.
    pub(crate) fn as_fence_request(&self) -> Request<'_> {
        Request {
            operation: &self.operation,
            mutates: self.mutates(),
            detail: &self.detail,
        }
    }
}

/// `key=value`, with `.member.` dropped from list keys and the value quoted
/// (escaping line breaks) when it is empty or holds spaces or quotes, so the
/// detail stays one line of unambiguous words.
fn word(key: &str, value: &str) -> String {
    let key = key.replace(".member.", ".");
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c == '"') {
        format!("{key}={value:?}")
    } else {
        format!("{key}={}", value.escape_debug())
    }
}

fn cut(detail: &str) -> String {
    match detail.char_indices().nth(MAX_DETAIL) {
        Some((end, _)) => format!("{}…", &detail[..end]),
        None => detail.to_owned(),
    }
}

/// Form decoding: `+` is a space, `%XX` a byte; a malformed escape is kept
/// as it is.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (b, escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (_, None) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_is_the_operation_and_the_other_parameters_the_detail() {
        let body = b"Action=CreateListener&Version=2015-12-01&LoadBalancerArn=arn%3Aaws%3Aelasticloadbalancing%3Aus-east-1%3A1%3Aloadbalancer%2Fnet%2Fa123%2F1&Protocol=TCP&Port=80&DefaultActions.member.1.Type=forward";
        let request = QueryRequest::parse(body).expect("a query request");
        assert_eq!(request.operation, "CreateListener");
        assert!(request.mutates());
        assert_eq!(
            request.detail,
            "LoadBalancerArn=arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/net/a123/1 \
             Protocol=TCP Port=80 DefaultActions.1.Type=forward"
        );
    }

    #[test]
    fn describes_gets_and_lists_are_reads() {
        for (body, mutates) in [
            (&b"Action=DescribeInstances&Version=2016-11-15"[..], false),
            (b"Action=GetConsoleOutput&InstanceId=i-1", false),
            (b"Action=ListTagsForResource", false),
            (b"Action=DeleteRoute&RouteTableId=rtb-1", true),
            (b"Action=ModifyInstanceAttribute", true),
        ] {
            let request = QueryRequest::parse(body).expect("a query request");
            assert_eq!(request.mutates(), mutates, "{}", request.operation);
        }
    }

    #[test]
    fn values_with_spaces_are_quoted_and_line_breaks_escaped() {
        let body = b"Action=CreateSecurityGroup&GroupDescription=%5Bk8s%5D+Managed+SecurityGroup&GroupName=k8s-a&Tag=a%0Ab&Empty=";
        let request = QueryRequest::parse(body).expect("a query request");
        assert_eq!(
            request.detail,
            r#"GroupDescription="[k8s] Managed SecurityGroup" GroupName=k8s-a Tag="a\nb" Empty="""#
        );
    }

    #[test]
    fn signing_parameters_never_reach_the_detail() {
        let body = b"Action=DescribeVpcs&AWSAccessKeyId=AKID&Signature=sig&X-Amz-Credential=AKID%2F1&X-Amz-Security-Token=tok&VpcId.1=vpc-1";
        let request = QueryRequest::parse(body).expect("a query request");
        assert_eq!(request.detail, "VpcId.1=vpc-1");
    }

    #[test]
    fn a_long_detail_is_cut_on_a_character_boundary() {
        let body = format!("Action=CreateTags&Value={}", "é".repeat(400));
        let request = QueryRequest::parse(body.as_bytes()).expect("a query request");
        assert_eq!(request.detail.chars().count(), MAX_DETAIL + 1);
        assert!(request.detail.ends_with('…'));
    }

    #[test]
    fn a_body_without_an_action_is_not_a_query_request() {
        assert_eq!(QueryRequest::parse(b"{\"json\":true}"), None);
        assert_eq!(QueryRequest::parse(b"Action=&Version=1"), None);
        assert_eq!(decode("100%"), "100%", "a malformed escape is kept");
    }
}
