//! Is there a memcached-compatible node at this address? One `version`
//! round trip with a deadline, before a node joins the pool: adding an
//! unreachable node would turn a share of every lookup into a timeout.

use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

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
    match tokio::time::timeout(deadline, attempt).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no answer within {deadline:?}"))),
    }
}
