//! A minimal HTTP/1.1 client for loopback endpoints the tasks poll: the test
//! API server (plain HTTP) and the CCM's `/metrics` (HTTPS, see `tls`), one
//! request per connection, with a bearer token when the task has one.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};

/// A response: status code and body.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl Response {
    /// A response whose body is read as text.
    fn text((status, body): (u16, Vec<u8>)) -> Self {
        Self {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// `http://host:port` → the socket address.
pub(crate) fn address(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url} is not an http:// URL"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    authority
        .parse()
        .with_context(|| format!("{url}: expected http://IP:PORT"))
}

/// Sends `method path` with an optional JSON body.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> anyhow::Result<Response> {
    request_as(addr, method, path, body, None)
}

/// [`request`] with `Authorization: Bearer <token>` when given one.
pub(crate) fn request_as(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
    token: Option<&str>,
) -> anyhow::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\nUser-Agent: xtask\r\n{}",
        authorization(token)
    );
    if let Some((content_type, body)) = body {
        head.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if let Some((_, body)) = body {
        stream.write_all(body.as_bytes())?;
    }
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw)
}

/// `GET path`.
pub(crate) fn get(addr: SocketAddr, path: &str) -> anyhow::Result<Response> {
    request(addr, "GET", path, None)
}

/// `GET path` over HTTPS, as the CCM serves its endpoints.
pub(crate) fn get_https(addr: SocketAddr, path: &str) -> anyhow::Result<Response> {
    get_https_as(addr, path, None)
}

/// [`get_https`] with `Authorization: Bearer <token>` when given one.
pub(crate) fn get_https_as(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> anyhow::Result<Response> {
    get_https_bytes(addr, path, token).map(Response::text)
}

/// [`get_https_as`] for a binary body: the status code and the body's bytes.
pub(crate) fn get_https_bytes(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut stream = connect_https(addr)?;
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: xtask\r\n{}\r\n",
        authorization(token)
    );
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // A server that closes without close_notify has still said everything.
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(err) => return Err(err).with_context(|| format!("reading from {addr}")),
    }
    parse_bytes(&raw)
}

/// A TLS connection to a loopback HTTPS server, to send many requests on.
pub(crate) fn connect_https(
    addr: SocketAddr,
) -> anyhow::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let connection = rustls::ClientConnection::new(ccm_loopback_tls::client_config(&[])?, name)?;
    Ok(rustls::StreamOwned::new(connection, tcp))
}

/// The `Authorization` header line for `token`, or nothing.
fn authorization(token: Option<&str>) -> String {
    token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default()
}

fn parse(raw: &[u8]) -> anyhow::Result<Response> {
    parse_bytes(raw).map(Response::text)
}

/// The status code and body (chunks joined) of a whole response.
fn parse_bytes(raw: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        bail!("malformed HTTP response")
    };
    let head = String::from_utf8_lossy(&raw[..end]);
    let body = &raw[end + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("HTTP response without a status code")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok((status, body))
}

fn dechunk(mut body: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("truncated chunk")?;
        let size = String::from_utf8_lossy(&body[..line]);
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .context("bad chunk size")?;
        let rest = &body[line + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(rest.get(..size).context("truncated chunk")?);
        body = rest.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let plain = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!((plain.status, plain.body.as_str()), (200, "ok"));
        let chunked = parse(b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!((chunked.status, chunked.body.as_str()), (503, "abcde"));
        let binary = parse_bytes(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n\x1f\x8b\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(binary, (200, vec![0x1f, 0x8b]));
    }

    #[test]
    fn a_token_becomes_a_bearer_header_and_none_adds_nothing() {
        assert_eq!(authorization(Some("abc")), "Authorization: Bearer abc\r\n");
        assert_eq!(authorization(None), "");
    }

    #[test]
    fn addresses_come_from_urls() {
        assert_eq!(address("http://127.0.0.1:6443").unwrap().port(), 6443);
        assert!(address("https://127.0.0.1:6443").is_err());
    }
}
