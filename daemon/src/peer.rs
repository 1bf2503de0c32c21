//! Who is at the other end of an accepted TCP connection: a local user (by
//! uid) or a remote host (by IP). Servers key their per-peer connection
//! limits by it (the admin API, the cache node's acceptor).
//!
//! Every local user connects from 127.0.0.1, so a per-IP limit lumps the
//! operator together with any user who floods the port. But a local peer's
//! socket lives in this host's kernel, and the kernel knows its owner: one
//! `sock_diag` netlink request (what `ss -e` uses) looks the peer's socket up
//! by its exact four-tuple and returns its uid (a few microseconds; one
//! netlink socket per thread is kept for it). When netlink is not
//! available, `/proc/net/tcp{,6}` holds the same row (slower: the whole table
//! is read). A peer whose socket is not found here is remote and is keyed by
//! its IP.
//!
//! ```text
//!  accept() ─> (local, peer) ─> sock_diag: socket with src=peer, dst=local? ─ yes ─> Peer::Uid(uid)
//!                                                                          └─ no ──> Peer::Ip(ip)
//! ```

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Who holds a connection, for per-peer limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// a local user (the peer's socket is on this host)
    Uid(u32),
    /// a remote host
    Ip(IpAddr),
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Uid(u) => write!(f, "uid {u}"),
            Peer::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Who is at `peer` on a connection accepted at `local`: the owner's uid
/// when the peer's socket is on this host, else the peer's IP (also when
/// the lookup fails: never worse than a per-IP limit).
pub fn identify(local: SocketAddr, peer: SocketAddr) -> Peer {
    let (local, peer) = (unmap(local), unmap(peer));
    match local_uid(local, peer) {
        Ok(Some(uid)) => Peer::Uid(uid),
        Ok(None) => Peer::Ip(peer.ip()),
        Err(e) => {
            tracing::debug!(%peer, error = %e, "cannot look the peer's socket up; keyed by its IP");
            Peer::Ip(peer.ip())
        }
    }
}

/// Who is at the other end of a UNIX stream socket: its uid
/// (`SO_PEERCRED`), or `None` if the kernel will not say.
pub fn unix_peer(fd: std::os::fd::BorrowedFd<'_>) -> Option<Peer> {
    use std::os::fd::AsRawFd;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&raw mut cred).cast(), &mut len) };
    (r == 0).then_some(Peer::Uid(cred.uid))
}

/// The uid owning the socket at `peer` connected to `local`, if that socket
/// is on this host.
pub fn local_uid(local: SocketAddr, peer: SocketAddr) -> io::Result<Option<u32>> {
    let (local, peer) = (unmap(local), unmap(peer));
    match netlink::uid_of(peer, local) {
        Ok(found) => Ok(found),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(_) => proc_net::uid_of(peer, local),
    }
}

/// `::ffff:a.b.c.d` as the IPv4 address it is (the peer's socket is then
/// an IPv4 one).
fn unmap(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// The `sock_diag` lookup of one TCP socket by its four-tuple
/// (linux/inet_diag.h: `inet_diag_req_v2` in, `inet_diag_msg` out).
mod netlink {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_HDRLEN: usize = 16;
    /// inet_diag_req_v2: family, protocol, ext, pad, states, inet_diag_sockid (48 bytes)
    const REQ_LEN: usize = 8 + 48;
    /// `idiag_uid`'s offset in inet_diag_msg (4 bytes of header, the 48-byte
    /// sockid, expires, rqueue, wqueue)
    const UID_AT: usize = 4 + 48 + 12;

    std::thread_local! {
        /// One netlink socket per thread, kept: a lookup per accepted
        /// connection is then two syscalls, not four. Dropped on any error.
        static SOCK: std::cell::RefCell<Option<(OwnedFd, u32)>> = const { std::cell::RefCell::new(None) };
    }

    /// The uid of the socket whose local end is `src` and remote end `dst`;
    /// `Err(ENOENT)` when there is none.
    pub fn uid_of(src: SocketAddr, dst: SocketAddr) -> io::Result<Option<u32>> {
        SOCK.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                *cell = Some((open()?, 0));
            }
            let (fd, seq) = cell.as_mut().expect("just made");
            *seq = seq.wrapping_add(1);
            let r = ask(fd, *seq, src, dst);
            if r.as_ref().is_err_and(|e| e.raw_os_error() != Some(libc::ENOENT)) {
                *cell = None;
            }
            r
        })
    }

    fn open() -> io::Result<OwnedFd> {
        // SAFETY: a plain socket(2); the fd is owned right away.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, valid descriptor nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn ask(fd: &OwnedFd, seq: u32, src: SocketAddr, dst: SocketAddr) -> io::Result<Option<u32>> {
        let req = request(seq, src, dst);
        // SAFETY: req is a valid buffer of its length; the kernel is the peer (address 0).
        let sent = unsafe {
            let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
            kernel.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0, (&raw const kernel).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32)
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        // the kernel answers within sendto; a reply to an older request
        // (one whose recv failed) is skipped by its sequence number
        let mut buf = [0u8; 1024];
        for _ in 0..4 {
            // SAFETY: buf is writable for its length.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let reply = &buf[..n as usize];
            if reply.get(8..12).is_some_and(|s| u32::from_ne_bytes(s.try_into().unwrap()) == seq) {
                return parse(reply);
            }
        }
        Err(io::Error::new(io::ErrorKind::InvalidData, "no sock_diag reply to our request"))
    }

    fn request(seq: u32, src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
        let len = NLMSG_HDRLEN + REQ_LEN;
        let mut m = Vec::with_capacity(len);
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills it
        let family = if src.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        m.extend_from_slice(&[family as u8, libc::IPPROTO_TCP as u8, 0, 0]);
        m.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
        m.extend_from_slice(&src.port().to_be_bytes());
        m.extend_from_slice(&dst.port().to_be_bytes());
        m.extend_from_slice(&addr16(src.ip()));
        m.extend_from_slice(&addr16(dst.ip()));
        m.extend_from_slice(&0u32.to_ne_bytes()); // any interface
        m.extend_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
        m
    }

    fn addr16(ip: IpAddr) -> [u8; 16] {
        let mut a = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => a[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => a = v6.octets(),
        }
        a
    }

    fn parse(reply: &[u8]) -> io::Result<Option<u32>> {
        let short = || io::Error::new(io::ErrorKind::InvalidData, "short sock_diag reply");
        let kind = u16::from_ne_bytes(reply.get(4..6).ok_or_else(short)?.try_into().unwrap());
        let body = &reply[NLMSG_HDRLEN.min(reply.len())..];
        if kind == NLMSG_ERROR {
            let errno = i32::from_ne_bytes(body.get(..4).ok_or_else(short)?.try_into().unwrap());
            return Err(io::Error::from_raw_os_error(-errno));
        }
        if kind != SOCK_DIAG_BY_FAMILY {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected sock_diag reply type {kind}")));
        }
        let uid = body.get(UID_AT..UID_AT + 4).ok_or_else(short)?;
        Ok(Some(u32::from_ne_bytes(uid.try_into().unwrap())))
    }
}

/// The same lookup in `/proc/net/tcp` and `/proc/net/tcp6`: the row whose
/// local address is the peer's and remote address ours; its 8th column is
/// the uid.
mod proc_net {
    use super::*;

    pub fn uid_of(src: SocketAddr, dst: SocketAddr) -> io::Result<Option<u32>> {
        let (table, want_src, want_dst) = match (src, dst) {
            (SocketAddr::V4(s), SocketAddr::V4(d)) => ("/proc/net/tcp", v4(s), v4(d)),
            _ => ("/proc/net/tcp6", v6(src), v6(dst)),
        };
        let text = std::fs::read_to_string(table)?;
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 7 && f[1].eq_ignore_ascii_case(&want_src) && f[2].eq_ignore_ascii_case(&want_dst) {
                return Ok(f[7].parse().ok());
            }
        }
        Ok(None)
    }

    /// `0100007F:1F90`: the address as the kernel's native-endian words.
    fn v4(a: std::net::SocketAddrV4) -> String {
        format!("{:08X}:{:04X}", u32::from_ne_bytes(a.ip().octets()), a.port())
    }

    fn v6(a: SocketAddr) -> String {
        let o = match a.ip() {
            IpAddr::V6(v6) => v6.octets(),
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        };
        let words: String = o.chunks(4).map(|c| format!("{:08X}", u32::from_ne_bytes(c.try_into().unwrap()))).collect();
        format!("{words}:{:04X}", a.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_local_peer_is_its_uid_and_both_lookups_agree() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let local = s.local_addr().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        assert_eq!(identify(local, peer), Peer::Uid(me));
        assert_eq!(netlink::uid_of(peer, local).unwrap(), Some(me));
        assert_eq!(proc_net::uid_of(peer, local).unwrap(), Some(me));
        // the server's own end of the connection is not the peer's socket
        let nobody: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(identify(local, nobody), Peer::Ip(nobody.ip()));
        assert_eq!(proc_net::uid_of(nobody, local).unwrap(), None);
    }

    #[test]
    fn a_unix_socket_peer_is_its_uid() {
        use std::os::fd::AsFd;
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let me = unsafe { libc::geteuid() };
        assert_eq!(unix_peer(a.as_fd()), Some(Peer::Uid(me)));
    }

    #[test]
    fn over_ipv6_loopback_too() {
        let Ok(l) = TcpListener::bind("[::1]:0") else { return }; // no IPv6 here
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let me = unsafe { libc::geteuid() };
        assert_eq!(identify(s.local_addr().unwrap(), peer), Peer::Uid(me));
        assert_eq!(proc_net::uid_of(peer, s.local_addr().unwrap()).unwrap(), Some(me));
    }
}
