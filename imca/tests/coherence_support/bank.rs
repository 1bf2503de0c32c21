//! Bank nodes as child processes (the launcher is `testkit-procs`, shared
//! with the cache node's and the bank's tests).

use testkit_procs::Memcached;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Debian's memcached 1.6
    Memcached,
    /// `imca cache-node`
    Imca,
}

pub struct BankNode {
    pub kind: NodeKind,
    server: Memcached,
}

#[allow(dead_code)]
impl BankNode {
    pub fn start(kind: NodeKind) -> BankNode {
        let server = match kind {
            NodeKind::Memcached => Memcached::start(),
            NodeKind::Imca => Memcached::cache_node(std::path::Path::new(env!("CARGO_BIN_EXE_imca")), &[]),
        };
        BankNode { kind, server }
    }

    pub fn port(&self) -> u16 {
        self.server.port()
    }

    pub fn addr(&self) -> String {
        self.server.addr_string()
    }

    pub fn freeze(&self) {
        self.server.freeze();
    }

    pub fn thaw(&self) {
        self.server.thaw();
    }

    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Start again on the same port (empty, as a restarted node is).
    pub fn restart(&mut self) {
        self.server.restart();
    }
}
