//! A minimal blocking HTTP/1.1 client for the admin API: what `imca ctl` and
//! the tests use. One request per connection (`Connection: close`), plain TCP
//! only — the admin API is meant for loopback or a trusted network, and this
//! keeps a TLS stack out of the binary.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("bad admin URL {0:?}: expected http://host:port")]
    Url(String),
    #[error("cannot reach the admin API at {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("admin API I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed HTTP reply: {0}")]
    Malformed(String),
    /// The API answered with an error status; `message` is its explanation.
    #[error("{status}: {message}")]
    Api { status: u16, kind: String, message: String },
    #[error("unexpected reply body: {0}")]
    Decode(String),
}

#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Result<serde_json::Value, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| ClientError::Decode(format!("{e}: {}", self.text())))
    }
}

#[derive(Clone, Debug)]
pub struct Client {
    host_port: String,
    token: Option<String>,
    pub timeout: Duration,
}

impl Client {
    /// `url`: `http://host:port` (a trailing `/` is fine) or just `host:port`.
    pub fn new(url: &str, token: Option<String>) -> Result<Client, ClientError> {
        let rest = url.strip_prefix("http://").unwrap_or(url).trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || url.starts_with("https://") || !rest.contains(':') {
            return Err(ClientError::Url(url.to_string()));
        }
        Ok(Client { host_port: rest.to_string(), token, timeout: Duration::from_secs(30) })
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.host_port)
    }

    /// Send one request and return the reply, whatever its status.
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Response, ClientError> {
        let addr = self
            .host_port
            .to_socket_addrs()
            .map_err(|source| ClientError::Connect { addr: self.host_port.clone(), source })?
            .next()
            .ok_or_else(|| ClientError::Url(self.host_port.clone()))?;
        let mut s = TcpStream::connect_timeout(&addr, self.timeout)
            .map_err(|source| ClientError::Connect { addr: self.host_port.clone(), source })?;
        s.set_read_timeout(Some(self.timeout))?;
        s.set_write_timeout(Some(self.timeout))?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\n",
            self.host_port
        );
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        let body = body.unwrap_or_default();
        if !body.is_empty() || matches!(method, "POST" | "PUT" | "DELETE") {
            req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut out = req.into_bytes();
        out.extend_from_slice(body);
        s.write_all(&out)?;
        let mut raw = Vec::new();
        match s.read_to_end(&mut raw) {
            Ok(_) => {}
            // A server that answers before reading everything (a 503 over
            // its connection cap, a 413) may reset the connection after its
            // reply: the reply is what counts.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && parse_response(&raw).is_ok() => {}
            Err(e) => return Err(e.into()),
        }
        parse_response(&raw)
    }

    /// GET `path`, decode a 2xx JSON reply, turn an error reply into `Api`.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        decode(self.request("GET", path, None)?)
    }

    /// Send `body` as JSON with `method`, decode the reply like [`Client::get`].
    pub fn send<B: Serialize, T: DeserializeOwned>(&self, method: &str, path: &str, body: &B) -> Result<T, ClientError> {
        let b = serde_json::to_vec(body).map_err(|e| ClientError::Decode(e.to_string()))?;
        decode(self.request(method, path, Some(&b))?)
    }
}

fn decode<T: DeserializeOwned>(r: Response) -> Result<T, ClientError> {
    if !(200..300).contains(&r.status) {
        let (kind, message) = match r.json() {
            Ok(v) => (
                v["error"].as_str().unwrap_or("").to_string(),
                v["message"].as_str().map(str::to_string).unwrap_or_else(|| r.text()),
            ),
            Err(_) => (String::new(), r.text().trim().to_string()),
        };
        return Err(ClientError::Api { status: r.status, kind, message });
    }
    serde_json::from_slice(&r.body).map_err(|e| ClientError::Decode(format!("{e}: {}", r.text())))
}

/// Parse a whole `Connection: close` reply: status line, headers, and a body
/// framed by Content-Length, chunked encoding, or the end of the stream.
pub fn parse_response(raw: &[u8]) -> Result<Response, ClientError> {
    let bad = |m: &str| ClientError::Malformed(m.to_string());
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status code"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut r = Response { status, headers, body: raw[end + 4..].to_vec() };
    if r.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        r.body = dechunk(&r.body)?;
    } else if let Some(n) = r.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        if r.body.len() < n {
            return Err(bad("body shorter than Content-Length"));
        }
        r.body.truncate(n);
    }
    Ok(r)
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, ClientError> {
    let bad = |m: &str| ClientError::Malformed(m.to_string());
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n").ok_or_else(|| bad("chunk size line"))?;
        let line = std::str::from_utf8(&b[..eol]).map_err(|_| bad("chunk size"))?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).map_err(|_| bad("chunk size"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err(bad("truncated chunk"));
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_and_chunked_bodies() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        let r = parse_response(b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (400, &b"abcde"[..]));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }

    #[test]
    fn urls() {
        assert_eq!(Client::new("http://127.0.0.1:9470/", None).unwrap().base(), "http://127.0.0.1:9470");
        assert_eq!(Client::new("localhost:1", None).unwrap().base(), "http://localhost:1");
        assert!(Client::new("https://x:1", None).is_err());
        assert!(Client::new("http://x", None).is_err());
    }
}
