//! rdma_cm plumbing: an event channel whose fd tokio watches, ids, events,
//! socket addresses.

use super::device::{check, last_err};
use rdma_sys::*;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use tokio::io::unix::AsyncFd;

pub(crate) struct Fd(pub RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(last_err("fcntl(O_NONBLOCK)"));
        }
    }
    Ok(())
}

/// Register an fd we own (and close only after dropping the AsyncFd) with tokio.
pub(crate) fn watch(fd: RawFd) -> io::Result<AsyncFd<Fd>> {
    // Safety: callers drop the AsyncFd before closing the fd (see the Drop impls).
    Ok(unsafe { AsyncFd::register_with_interest(Fd(fd), tokio::io::Interest::READABLE) }?)
}

/// An rdma_cm event channel (one per connection, one per listener).
pub(crate) struct EventChannel {
    afd: Option<AsyncFd<Fd>>,
    pub ch: *mut rdma_event_channel,
}

unsafe impl Send for EventChannel {}
unsafe impl Sync for EventChannel {}

impl EventChannel {
    pub(crate) fn new() -> io::Result<EventChannel> {
        let ch = unsafe { rdma_create_event_channel() };
        if ch.is_null() {
            return Err(last_err("rdma_create_event_channel"));
        }
        let fd = unsafe { (*ch).fd };
        let mut me = EventChannel { afd: None, ch };
        set_nonblocking(fd)?;
        me.afd = Some(watch(fd)?);
        Ok(me)
    }

    /// The next event, without waiting.
    pub(crate) fn try_next(&self) -> io::Result<Option<CmEvent>> {
        let mut ev = std::ptr::null_mut();
        if unsafe { rdma_get_cm_event(self.ch, &mut ev) } == 0 {
            return Ok(Some(CmEvent(ev)));
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            Ok(None)
        } else {
            Err(e)
        }
    }

    pub(crate) async fn next(&self) -> io::Result<CmEvent> {
        let afd = self.afd.as_ref().unwrap();
        loop {
            let mut g = afd.readable().await?;
            if let Some(ev) = self.try_next()? {
                return Ok(ev);
            }
            g.clear_ready();
        }
    }

    /// Wait for an event of kind `want` on a connecting id; anything else is an error.
    pub(crate) async fn expect(&self, want: rdma_cm_event_type::Type, what: &str) -> io::Result<CmEvent> {
        let ev = self.next().await?;
        if ev.kind() != want {
            let mut msg = format!("{what}: got {} (status {})", ev.name(), ev.status());
            let pd = ev.private_data();
            if ev.kind() == rdma_cm_event_type::RDMA_CM_EVENT_REJECTED && !pd.is_empty() {
                let text: String = pd.iter().take_while(|&&b| b != 0).map(|&b| b as char).collect();
                msg.push_str(&format!(": rejected: {text}"));
            }
            return Err(io::Error::new(io::ErrorKind::ConnectionRefused, msg));
        }
        Ok(ev)
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        self.afd = None; // deregister from the reactor before the fd closes
        unsafe { rdma_destroy_event_channel(self.ch) }
    }
}

/// A received event; acknowledged on drop (rdma_destroy_id and migrate wait for that).
pub(crate) struct CmEvent(*mut rdma_cm_event);

unsafe impl Send for CmEvent {}

impl CmEvent {
    pub(crate) fn kind(&self) -> rdma_cm_event_type::Type {
        unsafe { (*self.0).event }
    }
    pub(crate) fn status(&self) -> i32 {
        unsafe { (*self.0).status }
    }
    pub(crate) fn id(&self) -> *mut rdma_cm_id {
        unsafe { (*self.0).id }
    }
    pub(crate) fn name(&self) -> String {
        unsafe { std::ffi::CStr::from_ptr(rdma_event_str(self.kind())).to_string_lossy().into_owned() }
    }
    pub(crate) fn private_data(&self) -> Vec<u8> {
        unsafe {
            let c = &(*self.0).param.conn;
            if c.private_data.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(c.private_data as *const u8, c.private_data_len as usize).to_vec()
            }
        }
    }
}

impl Drop for CmEvent {
    fn drop(&mut self) {
        unsafe {
            rdma_ack_cm_event(self.0);
        }
    }
}

/// An owned rdma_cm id; destroyed on drop (drop it before its channel).
pub(crate) struct CmId(pub *mut rdma_cm_id);

unsafe impl Send for CmId {}
unsafe impl Sync for CmId {}

impl CmId {
    pub(crate) fn new(ch: &EventChannel) -> io::Result<CmId> {
        let mut id = std::ptr::null_mut();
        check(
            unsafe { rdma_create_id(ch.ch, &mut id, std::ptr::null_mut(), rdma_port_space::RDMA_PS_TCP) },
            "rdma_create_id",
        )?;
        Ok(CmId(id))
    }
    pub(crate) fn verbs(&self) -> *mut ibv_context {
        unsafe { (*self.0).verbs }
    }
    pub(crate) fn port_num(&self) -> u8 {
        unsafe { (*self.0).port_num }
    }
    pub(crate) fn local_port(&self) -> u16 {
        u16::from_be(unsafe { rdma_get_src_port(self.0) })
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        unsafe {
            rdma_destroy_id(self.0);
        }
    }
}

/// A socket address in the form rdma_cm takes.
pub(crate) struct RawAddr(libc::sockaddr_storage);

impl RawAddr {
    pub(crate) fn new(a: SocketAddr) -> RawAddr {
        let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        match a {
            SocketAddr::V4(v4) => {
                let sin = unsafe { &mut *(&mut s as *mut _ as *mut libc::sockaddr_in) };
                sin.sin_family = libc::AF_INET as _;
                sin.sin_port = v4.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            }
            SocketAddr::V6(v6) => {
                let sin6 = unsafe { &mut *(&mut s as *mut _ as *mut libc::sockaddr_in6) };
                sin6.sin6_family = libc::AF_INET6 as _;
                sin6.sin6_port = v6.port().to_be();
                sin6.sin6_addr.s6_addr = v6.ip().octets();
                sin6.sin6_scope_id = v6.scope_id();
            }
        }
        RawAddr(s)
    }
    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        &mut self.0 as *mut _ as *mut libc::sockaddr
    }
}

/// Resolve a "host:port" string (a name is resolved through the system resolver).
pub(crate) async fn resolve(addr: &str) -> io::Result<SocketAddr> {
    tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{addr}: no address")))
}

/// The peer's IP address and port of a connected id, for logs.
pub(crate) fn peer_addr(id: &CmId) -> String {
    unsafe {
        let a = &(*id.0).route.addr.dst_addr_union;
        match a.dst_addr.sa_family as i32 {
            libc::AF_INET => {
                let s = &a.dst_sin;
                let ip = std::net::Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
                format!("{ip}:{}", u16::from_be(s.sin_port))
            }
            libc::AF_INET6 => {
                let s = &a.dst_sin6;
                format!("[{}]:{}", std::net::Ipv6Addr::from(s.sin6_addr.s6_addr), u16::from_be(s.sin6_port))
            }
            f => format!("<address family {f}>"),
        }
    }
}
