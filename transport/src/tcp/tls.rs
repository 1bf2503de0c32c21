//! Optional TLS 1.3 (rustls) under the storage RPC over TCP, for networks
//! where others can watch or alter traffic. The volume secret's handshake
//! (`crate::auth`) still runs inside it and still decides who is served;
//! TLS adds confidentiality and integrity of every frame, and the client
//! checks the server's certificate against the CA file it was given.
//!
//! ```text
//!  imca storage --tls-cert server.pem --tls-key server.key   (PEM)
//!  imca mount   --tls-ca ca.pem                                (PEM; the CA, or the server's self-signed cert)
//! ```
//!
//! The certificate must name the address gateways use in
//! `--storage-servers` (an IP address SAN, or a DNS name). A plain client
//! reaching a TLS server is told so in plain text (status "TLS required");
//! RDMA has no TLS (it authenticates, it does not encrypt).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server's certificate and key.
#[derive(Clone)]
pub struct ServerTls(tokio_rustls::TlsAcceptor);

impl ServerTls {
    pub fn from_files(cert: &Path, key: &Path) -> Result<ServerTls, String> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .and_then(|i| i.collect())
            .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
        if certs.is_empty() {
            return Err(format!("--tls-cert {}: no certificate in the file", cert.display()));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
        Ok(ServerTls(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
    }

    pub(super) async fn accept(&self, s: TcpStream) -> std::io::Result<Stream> {
        Ok(Stream::TlsServer(Box::new(self.0.accept(s).await?)))
    }
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls(..)")
    }
}

/// The certificates a client trusts for its servers.
#[derive(Clone)]
pub struct ClientTls(tokio_rustls::TlsConnector);

impl ClientTls {
    pub fn from_ca_file(ca: &Path) -> Result<ClientTls, String> {
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(ca)
            .and_then(|i| i.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
        for c in certs {
            roots.add(c).map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            return Err(format!("--tls-ca {}: no certificate in the file", ca.display()));
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls(tokio_rustls::TlsConnector::from(Arc::new(config))))
    }

    /// TLS over `s` to `addr` ("host:port"; the certificate must name host).
    pub(super) async fn connect(&self, addr: &str, s: TcpStream) -> std::io::Result<Stream> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("server name {host:?}: {e}")))?;
        Ok(Stream::TlsClient(Box::new(self.0.connect(name, s).await?)))
    }
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls(..)")
    }
}

/// A connection's byte stream: plain TCP or TLS over it.
pub enum Stream {
    Plain(TcpStream),
    TlsServer(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    TlsClient(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

pub(super) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
pub(super) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

impl Stream {
    /// Reader and writer halves for the two tasks of a connection. Plain TCP
    /// splits without a lock; TLS shares its state through tokio's split.
    pub(super) fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
            tls => {
                let (r, w) = tokio::io::split(tls);
                (Box::new(r), Box::new(w))
            }
        }
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => $e,
            Stream::TlsServer($s) => $e,
            Stream::TlsClient($s) => $e,
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::TlsServer(s) => s.is_write_vectored(),
            Stream::TlsClient(s) => s.is_write_vectored(),
        }
    }
}
