//! A free loopback port, for a server that must be told its port (memcached
//! has no `-p 0` that reports the port it took).

/// A port nothing listens on right now. Another test may take it before the
/// caller binds it: [`crate::Memcached`] checks and tries again.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
