//! The hello exchange that opens every connection: versions and limits
//! agreed, then both ends authenticated (`crate::auth`), then the server's
//! verdict. Generic over the stream, so it runs the same over TLS.
//!
//! ```text
//!  client                                   server
//!  hello_c (nonce_c, flags) ───────────────>  version? credentials offered when required?
//!         <─────────── hello_s (nonce_s, proof_s)   (or an 8-byte refusal)
//!  proof_s ok? ── proof_c ─────────────────>  proof_c ok? a connection slot free?
//!         <───────────── verdict: "IMCA" version status (0 ok, 2 busy, 4 auth failed)
//!  frames ...
//! ```
//!
//! Without a key on either side (`--insecure`) the proofs are left out and
//! the rest is the same. A client with a key never talks to a server that
//! does not prove it holds the same key, and a server with a key serves no
//! operation to a client that has not proved it.

use super::frame::*;
use super::PROTOCOL_VERSION;
use crate::{auth, TransportError};
use secret::Key;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The client's side, on a freshly connected stream: returns the server's
/// hello once the server has accepted us. `addr` names the server in errors.
pub async fn client<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    addr: &str,
    max_frame: usize,
    key: Option<&Key>,
) -> Result<Hello, TransportError> {
    let mut ours = Hello::ours(max_frame, None);
    ours.nonce = secret::nonce();
    if key.is_some() {
        ours.flags |= F_AUTH;
    }
    let ours = ours.encode();
    s.write_all(&ours).await?;
    let io = |e: std::io::Error| TransportError::Connect(format!("{addr}: handshake: {e}"));
    let theirs = read_hello(s).await.map_err(io)?.map_err(|e| TransportError::Protocol(format!("{addr}: {e}")))?;
    refused(addr, &theirs)?;
    if let Some(key) = key {
        if !theirs.authenticates() {
            return Err(TransportError::Auth(format!(
                "{addr}: the server does not authenticate (started with --insecure?); \
                 refusing it, since this client holds a volume secret"
            )));
        }
        let bytes = theirs.encode();
        if !auth::check_server(key, &ours, &bytes[..HELLO_PROOF_AT], &theirs.proof) {
            return Err(TransportError::Auth(format!(
                "{addr}: the server failed authentication: it does not hold this volume's secret \
                 (another volume, or a different --secret-file)"
            )));
        }
        s.write_all(&auth::client_proof(key, &ours, &bytes)).await?;
    }
    let verdict = read_verdict(s).await.map_err(io)?.map_err(|e| TransportError::Protocol(format!("{addr}: {e}")))?;
    refused(addr, &verdict)?;
    Ok(theirs)
}

/// A refusal in a hello or verdict as the error the caller reports.
fn refused(addr: &str, h: &Hello) -> Result<(), TransportError> {
    match h.status {
        STATUS_OK if h.version == PROTOCOL_VERSION => Ok(()),
        STATUS_BUSY => Err(TransportError::Connect(format!("{addr}: server busy: every connection slot is taken"))),
        STATUS_AUTH_REQUIRED => Err(TransportError::Auth(format!(
            "{addr}: the server requires the volume's credentials; give this client the volume's --secret-file"
        ))),
        STATUS_AUTH_FAILED => Err(TransportError::Auth(format!(
            "{addr}: the server refused our credentials (a different volume secret)"
        ))),
        STATUS_TLS_REQUIRED => Err(TransportError::Connect(format!(
            "{addr}: the server requires TLS; give this client the CA of its certificate (--tls-ca)"
        ))),
        _ => Err(TransportError::Protocol(format!(
            "{addr}: protocol version mismatch: we speak {PROTOCOL_VERSION}, the server speaks {}",
            h.version
        ))),
    }
}

/// Why the server side ended a handshake: a status to send (if any) and a
/// line for the log.
pub(super) struct Refusal {
    pub status: Option<u16>,
    pub auth: bool,
    pub why: String,
}

/// The server's side up to (not including) the verdict: the client's hello,
/// ours, and the client's proof when we hold a key.
pub(super) async fn server<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    max_frame: usize,
    idle: Option<std::time::Duration>,
    key: Option<&Key>,
) -> std::io::Result<Result<Hello, Refusal>> {
    let theirs = match read_hello(s).await? {
        Ok(h) => h,
        Err(why) => return Ok(Err(Refusal { status: None, auth: false, why })),
    };
    if theirs.version != PROTOCOL_VERSION || theirs.status != STATUS_OK {
        let v = theirs.version;
        let why = if v != PROTOCOL_VERSION {
            format!("client speaks protocol version {v}, this server speaks {PROTOCOL_VERSION}")
        } else {
            format!("a client hello with status {}", theirs.status)
        };
        return Ok(Err(Refusal { status: Some(STATUS_VERSION), auth: false, why }));
    }
    if key.is_some() && !theirs.authenticates() {
        let why = "client offered no volume credentials (a gateway without --secret-file, or not one of ours)".into();
        return Ok(Err(Refusal { status: Some(STATUS_AUTH_REQUIRED), auth: true, why }));
    }
    let client_hello = theirs.encode();
    let mut ours = Hello::ours(max_frame, idle);
    ours.nonce = secret::nonce();
    if let Some(key) = key {
        ours.flags |= F_AUTH;
        ours.proof = auth::server_proof(key, &client_hello, &ours.encode()[..HELLO_PROOF_AT]);
    }
    let ours = ours.encode();
    s.write_all(&ours).await?;
    if let Some(key) = key {
        let mut proof = [0u8; PROOF_LEN];
        s.read_exact(&mut proof).await?;
        if !auth::check_client(key, &client_hello, &ours, &proof) {
            let why = "client failed authentication: its proof does not match this volume's secret \
                       (a gateway with another --secret-file, or not one of ours)"
                .into();
            return Ok(Err(Refusal { status: Some(STATUS_AUTH_FAILED), auth: true, why }));
        }
    }
    Ok(Ok(theirs))
}

/// The whole server side without connection slots: hello, proofs, and the
/// verdict (or the refusal). For peers that stand in for a server (tests,
/// fault injection): a real server also decides on a slot first.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    max_frame: usize,
    key: Option<&Key>,
) -> std::io::Result<Result<Hello, String>> {
    match server(s, max_frame, None, key).await? {
        Ok(h) => {
            s.write_all(&Hello::verdict(STATUS_OK)).await?;
            Ok(Ok(h))
        }
        Err(r) => {
            if let Some(status) = r.status {
                s.write_all(&Hello::refusal(status).wire()).await?;
            }
            Ok(Err(r.why))
        }
    }
}
