//! Tiny HTTP helpers for whole-system coherence tests: tune the volume
//! config through a gateway's admin API and read Prometheus counters.

use std::io::{Read, Write};

/// PUT a JSON body with the admin token (changes need it); returns the
/// status line and body.
pub fn put_json(url: &str, token: &str, body: &str) -> String {
    let rest = url.strip_prefix("http://").expect("http:// URL");
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

/// Sum of every sample of `name` whose labels include all of `labels`
/// (`k="v"` strings), in Prometheus text `text`.
pub fn sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|lab| rest.contains(lab))).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}
