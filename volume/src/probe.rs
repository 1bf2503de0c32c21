//! Is there a memcached-compatible node at this address? One `version`
//! round trip with a deadline, before a node joins the pool: adding an
//! unreachable node would turn a share of every lookup into a timeout.
//! Also `stats settings` (the nodes' item limit, a [`Limits`] of every
//! change), `stats` (for the status page) and `flush_all` (for the flush
//! endpoint and readmitting fenced nodes), spoken directly so they work on
//! any memcached-compatible node, outside the bank and its epochs.

use crate::validate::DEFAULT_ITEM_LIMIT;
use crate::{Invalid, Limits};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A node may join the pool only if it answers `version` now.
pub async fn reachable(addr: &str) -> Result<(), Invalid> {
    memcached_version(addr, PROBE_TIMEOUT)
        .await
        .map(|_| ())
        .map_err(|e| Invalid::new("addr", format!("cache node {addr} is unreachable: {e}")))
}

/// The limits a config over `nodes` must respect: `stripe_unit` (the
/// checking gateway's, if it should be enforced) and the smallest `-I`
/// among the nodes that answer `stats settings` (memcached's default when
/// none does).
pub async fn limits(stripe_unit: Option<u32>, nodes: &[String]) -> Limits {
    let settings = futures::future::join_all(nodes.iter().map(|n| memcached_settings(n, PROBE_TIMEOUT))).await;
    let item_limit = settings
        .iter()
        .filter_map(|r| r.as_ref().ok()?.get("item_size_max")?.parse::<u32>().ok())
        .min()
        .unwrap_or(DEFAULT_ITEM_LIMIT);
    Limits { stripe_unit, item_limit: Some(item_limit), ..Limits::UNKNOWN }
}

/// Connect, send `version`, expect `VERSION <v>`; returns `<v>`.
pub async fn memcached_version(addr: &str, deadline: Duration) -> std::io::Result<String> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(b"version\r\n").await?;
        let mut line = String::new();
        let mut r = BufReader::new(&mut s);
        r.read_line(&mut line).await?;
        match line.trim_end().strip_prefix("VERSION ") {
            Some(v) => Ok(v.to_string()),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not a memcached-compatible node (answered {:?})", line.trim_end()),
            )),
        }
    };
    with_deadline(deadline, attempt).await
}

/// `stats`: the node's general statistics (curr_items, bytes,
/// limit_maxbytes, evictions, ...), as memcached and `imca cache-node` report them.
pub async fn memcached_stats(addr: &str, deadline: Duration) -> std::io::Result<HashMap<String, String>> {
    stats_of(addr, "stats", deadline).await
}

/// `stats settings`: the node's configuration (item_size_max is `-I`).
pub async fn memcached_settings(addr: &str, deadline: Duration) -> std::io::Result<HashMap<String, String>> {
    stats_of(addr, "stats settings", deadline).await
}

async fn stats_of(addr: &str, command: &str, deadline: Duration) -> std::io::Result<HashMap<String, String>> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(format!("{command}\r\n").as_bytes()).await?;
        let mut r = BufReader::new(&mut s);
        let mut out = HashMap::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).await? == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed during stats"));
            }
            let line = line.trim_end();
            if line == "END" {
                return Ok(out);
            }
            match line.strip_prefix("STAT ").and_then(|l| l.split_once(' ')) {
                Some((k, v)) => {
                    out.insert(k.to_string(), v.to_string());
                }
                None => {
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("unexpected {line:?}")))
                }
            }
        }
    };
    with_deadline(deadline, attempt).await
}

/// `flush_all`: drop every item of the node.
pub async fn memcached_flush_all(addr: &str, deadline: Duration) -> std::io::Result<()> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(b"flush_all\r\n").await?;
        let mut line = String::new();
        BufReader::new(&mut s).read_line(&mut line).await?;
        if line.trim_end() == "OK" {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("flush_all answered {:?}", line.trim_end())))
        }
    };
    with_deadline(deadline, attempt).await
}

async fn with_deadline<T>(deadline: Duration, f: impl std::future::Future<Output = std::io::Result<T>>) -> std::io::Result<T> {
    match tokio::time::timeout(deadline, f).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {deadline:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian's memcached on a free port (the real thing, not a fake).
    struct Memcached(std::process::Child, String);

    impl Drop for Memcached {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    async fn memcached() -> Memcached {
        assert!(
            std::path::Path::new("/usr/bin/memcached").exists(),
            "this test needs Debian's memcached (apt-get install memcached, or ./dev deps)"
        );
        // memcached cannot report an ephemeral port; take a free one and retry on a race.
        for _ in 0..20 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let child = std::process::Command::new("/usr/bin/memcached")
                .args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", "16", "-u", "root"])
                .spawn()
                .unwrap();
            let m = Memcached(child, format!("127.0.0.1:{port}"));
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if memcached_version(&m.1, Duration::from_secs(1)).await.is_ok() {
                    return m;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        panic!("memcached did not start");
    }

    #[tokio::test]
    async fn stats_and_flush_against_real_memcached() {
        let m = memcached().await;
        let mut s = TcpStream::connect(&m.1).await.unwrap();
        s.write_all(b"set k 0 0 5\r\nhello\r\n").await.unwrap();
        let mut line = String::new();
        BufReader::new(&mut s).read_line(&mut line).await.unwrap();
        assert_eq!(line, "STORED\r\n");
        let st = memcached_stats(&m.1, PROBE_TIMEOUT).await.unwrap();
        assert_eq!(st["curr_items"], "1");
        assert!(st.contains_key("limit_maxbytes") && st.contains_key("evictions"));
        let settings = memcached_settings(&m.1, PROBE_TIMEOUT).await.unwrap();
        assert_eq!(settings["item_size_max"], "1048576");
        memcached_flush_all(&m.1, PROBE_TIMEOUT).await.unwrap();
        // flush_all invalidates immediately; the item count drops lazily, so check a get.
        let mut s = TcpStream::connect(&m.1).await.unwrap();
        s.write_all(b"get k\r\n").await.unwrap();
        let mut line = String::new();
        BufReader::new(&mut s).read_line(&mut line).await.unwrap();
        assert_eq!(line, "END\r\n");
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        assert!(memcached_version(&dead, PROBE_TIMEOUT).await.is_err());
    }
}
