//! Mutual authentication of a connection by challenge and keyed MAC, the
//! same for TCP and RDMA: both ends hold the volume secret's handshake key
//! ([`secret::Purpose::RpcHandshake`]); neither the secret nor the key
//! crosses the wire.
//!
//! ```text
//!  client ── hello_c (nonce_c, "I authenticate") ─────────────────────────>  server
//!         <── hello_s (nonce_s, proof_s = MAC(k, "server", hello_c, hello_s)) ──
//!  client checks proof_s: the server holds k (else: refuse the server)
//!         ── proof_c = MAC(k, "client", hello_c, hello_s + proof_s) ──────────>
//!                                server checks proof_c before any operation
//! ```
//!
//! Each proof covers both hellos (with both fresh nonces and every announced
//! limit), so a recorded proof is useless on another connection, one side's
//! proof cannot be reflected as the other's, and a hello altered in flight
//! fails the check. The handshake authenticates the peers, not the bytes
//! that follow: protecting those from a man in the middle is TLS's job.

use secret::{Key, Tag};

const SERVER: &[u8] = b"server";
const CLIENT: &[u8] = b"client";

/// The server's proof: over the client's hello and its own hello up to
/// (not including) the proof field.
pub(crate) fn server_proof(key: &Key, client_hello: &[u8], server_hello_head: &[u8]) -> Tag {
    key.mac(&[SERVER, client_hello, server_hello_head])
}

/// The client's proof: over both whole hellos (the server's with its proof).
pub(crate) fn client_proof(key: &Key, client_hello: &[u8], server_hello: &[u8]) -> Tag {
    key.mac(&[CLIENT, client_hello, server_hello])
}

pub(crate) fn check_server(key: &Key, client_hello: &[u8], server_hello_head: &[u8], proof: &[u8]) -> bool {
    key.verify(&[SERVER, client_hello, server_hello_head], proof)
}

pub(crate) fn check_client(key: &Key, client_hello: &[u8], server_hello: &[u8], proof: &[u8]) -> bool {
    key.verify(&[CLIENT, client_hello, server_hello], proof)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_are_bound_to_role_transcript_and_key() {
        let k = Key::from_raw([1; 32]);
        let other = Key::from_raw([2; 32]);
        let (hc, hs) = (b"hello-c".as_slice(), b"hello-s".as_slice());
        let ps = server_proof(&k, hc, hs);
        assert!(check_server(&k, hc, hs, &ps));
        assert!(!check_server(&other, hc, hs, &ps), "another volume's key");
        assert!(!check_server(&k, b"hello-x", hs, &ps), "another connection's hello");
        assert!(!check_client(&k, hc, hs, &ps), "a server proof reflected as a client proof");
        let pc = client_proof(&k, hc, hs);
        assert!(check_client(&k, hc, hs, &pc));
        assert!(!check_client(&k, hc, b"hello-y", &pc));
    }
}
