//! SASL for the binary protocol (`-S` with `-Y`), checked with a client
//! nobody here wrote: the `memcache` crate, which logs in with SASL PLAIN
//! when its URL carries a user and password (binary protocol) and with
//! memcached's `-Y` login line over the text protocol.

mod common;

use cache_proto::binary::{op, Request};
use common::TestNode;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

fn node(sasl: bool) -> TestNode {
    let users = cache_node::auth::Users::parse("imca:s3cret\n").unwrap();
    TestNode::start(cache_node::Config { auth: Some(Arc::new(users)), sasl, ..cache_node::Config::local() })
}

/// One binary request on `s`; the reply's status and value.
fn call(s: &mut TcpStream, opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> (u16, Vec<u8>) {
    s.write_all(&Request::encode(opcode, extras, key, value, 7, 0)).unwrap();
    let mut head = [0u8; 24];
    s.read_exact(&mut head).unwrap();
    let h = cache_proto::binary::Header::decode(&head).unwrap();
    let mut body = vec![0u8; h.bodylen as usize];
    s.read_exact(&mut body).unwrap();
    (h.status, body[h.extlen as usize + h.keylen as usize..].to_vec())
}

#[test]
fn binary_clients_log_in_with_sasl_plain_and_text_clients_with_the_login_line() {
    let n = node(true);
    let sasl = memcache::Client::connect(format!("memcache://imca:s3cret@{}", n.addr)).unwrap();
    sasl.set("k", "over binary", 0).unwrap();
    assert_eq!(sasl.get::<String>("k").unwrap().as_deref(), Some("over binary"));
    let text = memcache::Client::connect(format!("memcache://imca:s3cret@{}?protocol=ascii", n.addr)).unwrap();
    assert_eq!(text.get::<String>("k").unwrap().as_deref(), Some("over binary"));
}

#[test]
fn nothing_runs_before_the_sasl_login() {
    let n = node(true);
    let mut s = TcpStream::connect(n.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let ttl = [0u8; 8];
    // refused: a set, a get, a flush, a too-large set (which would drop the old item)
    assert_eq!(call(&mut s, op::SET, &ttl, b"k", b"v").0, 0x20);
    assert_eq!(call(&mut s, op::GET, &[], b"k", &[]).0, 0x20);
    assert_eq!(call(&mut s, op::FLUSH, &[], &[], &[]).0, 0x20);
    // other mechanisms, malformed PLAIN data and a wrong password fail
    assert_eq!(call(&mut s, op::SASL_LIST_MECHS, &[], &[], &[]), (0, b"PLAIN".to_vec()));
    assert_eq!(call(&mut s, op::SASL_AUTH, &[], b"CRAM-MD5", b"imca s3cret").0, 0x20);
    assert_eq!(call(&mut s, op::SASL_AUTH, &[], b"PLAIN", b"imca s3cret").0, 0x20);
    assert_eq!(call(&mut s, op::SASL_AUTH, &[], b"PLAIN", b"\0imca\0guess").0, 0x20);
    assert_eq!(call(&mut s, op::SASL_STEP, &[], b"PLAIN", b"").0, 0x20);
    // the right one, then requests run
    assert_eq!(call(&mut s, op::SASL_AUTH, &[], b"PLAIN", b"\0imca\0s3cret"), (0, b"Authenticated".to_vec()));
    assert_eq!(call(&mut s, op::SET, &ttl, b"k", b"v").0, 0);
    assert_eq!(call(&mut s, op::GET, &[], b"k", &[]), (0, b"v".to_vec()));
}

#[test]
fn without_s_a_y_node_speaks_text_only_as_memcached_does() {
    let n = node(false);
    // a SASL login is a text line like any other there: refused, in text
    let mut s = TcpStream::connect(n.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = Request::encode(op::SASL_AUTH, &[], b"PLAIN", b"\0imca\0s3cret", 7, 0);
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).unwrap();
    let mut said = [0u8; 64];
    let len = s.read(&mut said).unwrap();
    assert!(said[..len].starts_with(b"CLIENT_ERROR"), "{:?}", String::from_utf8_lossy(&said[..len]));
    let text = memcache::Client::connect(format!("memcache://imca:s3cret@{}?protocol=ascii", n.addr)).unwrap();
    text.set("k", "v", 0).unwrap();
    assert_eq!(text.get::<String>("k").unwrap().as_deref(), Some("v"));
}
