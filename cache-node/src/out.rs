//! A connection's reply on its way out: the bytes the executors compose,
//! with large values *pinned* in between instead of copied.
//!
//! ```text
//!  Session::process ──> exec_* compose into Out ──> server.rs writes it with
//!                        headers: Out::buf()          one writev (write_to):
//!                        values:  Out::value()        [buf..][value][buf..]…
//! ```
//!
//! A multi-get of 64 values of 2 KiB used to copy every value into the
//! reply buffer under its shard lock, and the kernel copied it again; that
//! copy was 10 % of the server's CPU (docs/benchmarks/archive/cache-node-vs-memcached.md).
//! Items hold their values as `bytes::Bytes`, so a value is pinned by a
//! refcount (the item can be replaced or evicted meanwhile; the old value
//! lives until written) and the kernel reads it straight from the item's
//! memory, as memcached's `sendmsg` iovecs do. Small values are still copied:
//! below [`PIN_MIN`] an iovec and two atomic refcount updates cost more than
//! the copy.
//!
//! Other transports (RDMA, tests) take the reply as one `Vec<u8>`
//! ([`Out::into_vec`]): the values are copied there, once.

use std::io::IoSlice;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::store::Value;

/// Values at least this long are pinned rather than copied.
pub const PIN_MIN: usize = 512;

/// The only value of a reply is copied up to this size, pinned above it
/// ([`Out::value_alone`]).
pub const COPY_ALONE_MAX: usize = 4096;

/// The buffer a cleared `Out` starts again with.
const FRESH: usize = 16 * 1024;

/// What one `writev` is handed at most (Linux's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

#[derive(Default)]
pub struct Out {
    buf: Vec<u8>,
    /// (offset in `buf` the value is sent at, value), in offset order
    pinned: Vec<(usize, Value)>,
    pinned_len: usize,
}

/// A position in an [`Out`] to [`truncate`](Out::truncate) back to.
#[derive(Clone, Copy)]
pub struct Mark {
    buf: usize,
    pinned: usize,
    pinned_len: usize,
}

impl Out {
    pub fn with_capacity(n: usize) -> Out {
        Out { buf: Vec::with_capacity(n), ..Out::default() }
    }

    /// An `Out` that continues `v` (what is already in it goes first).
    pub fn from_vec(v: Vec<u8>) -> Out {
        Out { buf: v, ..Out::default() }
    }

    /// Bytes to send, pinned values included.
    pub fn len(&self) -> usize {
        self.buf.len() + self.pinned_len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The composed bytes: what is appended here is sent after every
    /// value pinned so far.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Appends a value: copied when short, else pinned.
    pub fn value(&mut self, v: &Value) {
        if v.len() < PIN_MIN {
            self.buf.extend_from_slice(v);
        } else {
            self.pinned_len += v.len();
            self.pinned.push((self.buf.len(), v.clone()));
        }
    }

    /// Appends the only value of a reply (a single-key get): copied up to
    /// [`COPY_ALONE_MAX`] bytes while the buffer stays within its fresh
    /// size (a deep pipeline of such gets pins, rather than growing and
    /// dropping a large buffer per batch), else pinned as by
    /// [`value`](Self::value).
    ///
    /// Pinning one 2 KiB value cost more than copying it (issue 14,
    /// docs/benchmarks/archive/cache-node-vs-memcached.md): the pin's atomic increment stalls on the value's
    /// cold first line, the kernel then misses the other lines inside a
    /// three-piece `writev`, and the release is a second atomic. The copy
    /// takes the same misses in one streaming pass, with no atomics, and the
    /// kernel reads one warm buffer in one `write`: 0.4–0.6 µs less system
    /// and 0.1–0.2 µs more user time per op of a 2 KiB get/set mix. A
    /// multi-get still pins: copying every value under its shard lock is
    /// what pinning removed there.
    pub fn value_alone(&mut self, v: &Value) {
        if v.len() <= COPY_ALONE_MAX && self.buf.len() + v.len() <= FRESH {
            self.buf.extend_from_slice(v);
        } else {
            self.value(v);
        }
    }

    pub fn mark(&self) -> Mark {
        Mark { buf: self.buf.len(), pinned: self.pinned.len(), pinned_len: self.pinned_len }
    }

    /// Drops everything appended since `m`.
    pub fn truncate(&mut self, m: Mark) {
        self.buf.truncate(m.buf);
        self.pinned.truncate(m.pinned);
        self.pinned_len = m.pinned_len;
    }

    /// Empties the reply (releasing the pinned values); a buffer that grew
    /// past `keep` bytes (a huge reply) is not kept.
    pub fn clear(&mut self, keep: usize) {
        self.buf.clear();
        self.pinned.clear();
        self.pinned_len = 0;
        if self.buf.capacity() > keep {
            self.buf = Vec::with_capacity(FRESH);
        }
    }

    /// The reply as one buffer (the pinned values copied in).
    pub fn into_vec(self) -> Vec<u8> {
        if self.pinned.is_empty() {
            return self.buf;
        }
        let mut v = Vec::with_capacity(self.len());
        for p in self.pieces() {
            v.extend_from_slice(p);
        }
        v
    }

    /// The reply in order: the pieces of `buf` between the pinned values,
    /// and the values.
    fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        let mut at = 0;
        self.pinned
            .iter()
            .flat_map(move |(off, v)| {
                let gap = &self.buf[at..*off];
                at = *off;
                [gap, &v[..]]
            })
            .chain(std::iter::once(&self.buf[self.pinned.last().map_or(0, |p| p.0)..]))
            .filter(|p| !p.is_empty())
    }

    /// The reply in order, as the slices a `writev` takes.
    fn slices(&self) -> Vec<IoSlice<'_>> {
        self.pieces().map(IoSlice::new).collect()
    }

    /// Writes the whole reply: one `write` when nothing is pinned, else
    /// vectored writes, resumed where the socket took less.
    pub async fn write_to<W: AsyncWrite + Unpin>(&self, w: &mut W) -> std::io::Result<()> {
        if self.pinned.is_empty() {
            return w.write_all(&self.buf).await;
        }
        if self.pinned.len() <= FEW_PINNED {
            // a single-key get: its slices on the stack, no allocation per reply
            let mut a = [IoSlice::new(&[]); 2 * FEW_PINNED + 1];
            let mut n = 0;
            for p in self.pieces() {
                a[n] = IoSlice::new(p);
                n += 1;
            }
            return write_slices(w, &mut a[..n]).await;
        }
        write_slices(w, &mut self.slices()).await
    }
}

/// Up to this many pinned values, [`Out::write_to`] keeps the slices on the stack.
const FEW_PINNED: usize = 4;

/// Writes `slices` whole with vectored writes, resuming after partial ones.
async fn write_slices<W: AsyncWrite + Unpin>(w: &mut W, slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    let mut rest = slices;
    while !rest.is_empty() {
        let n = w.write_vectored(&rest[..rest.len().min(MAX_IOV)]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big(c: u8) -> Value {
        vec![c; PIN_MIN].into()
    }

    #[test]
    fn pinned_values_keep_their_place() {
        let mut o = Out::default();
        o.buf().extend_from_slice(b"A ");
        o.value(&big(b'x'));
        o.buf().extend_from_slice(b"\r\n");
        o.value(&Value::from(&b"small"[..]));
        o.value(&big(b'y'));
        o.value(&big(b'z'));
        o.buf().extend_from_slice(b"END");
        let want = [&b"A "[..], &[b'x'; PIN_MIN], b"\r\nsmall", &[b'y'; PIN_MIN], &[b'z'; PIN_MIN], b"END"].concat();
        assert_eq!(o.len(), want.len());
        assert_eq!(o.into_vec(), want);
    }

    #[test]
    fn a_lone_value_is_copied_up_to_its_bound() {
        let mut o = Out::default();
        o.value_alone(&vec![b'a'; COPY_ALONE_MAX].into());
        assert!(o.pinned.is_empty());
        o.value_alone(&vec![b'b'; COPY_ALONE_MAX + 1].into());
        assert_eq!(o.pinned.len(), 1);
        assert_eq!(o.into_vec(), [vec![b'a'; COPY_ALONE_MAX], vec![b'b'; COPY_ALONE_MAX + 1]].concat());
    }

    #[test]
    fn a_lone_value_is_pinned_once_the_buffer_is_full() {
        let mut o = Out::default();
        o.buf().resize(FRESH - 10, b'h');
        o.value_alone(&vec![b'a'; 11].into());
        assert!(o.pinned.is_empty(), "short values are copied anyway");
        o.value_alone(&vec![b'b'; PIN_MIN].into());
        assert_eq!(o.pinned.len(), 1);
        assert_eq!(o.len(), FRESH + 1 + PIN_MIN);
    }

    #[test]
    fn truncate_drops_pinned_values_too() {
        let mut o = Out::from_vec(b"X".to_vec());
        let m = o.mark();
        o.value(&big(b'x'));
        o.buf().extend_from_slice(b"tail");
        o.truncate(m);
        o.buf().extend_from_slice(b"Y");
        assert_eq!(o.len(), 2);
        assert_eq!(o.into_vec(), b"XY");
    }

    /// A writer that takes at most 7 bytes per call, vectored or not.
    struct Dribble(Vec<u8>);

    impl AsyncWrite for Dribble {
        fn poll_write(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>, b: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
            let n = b.len().min(7);
            self.0.extend_from_slice(&b[..n]);
            std::task::Poll::Ready(Ok(n))
        }
        fn poll_flush(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn partial_writes_resume() {
        let mut o = Out::default();
        for c in b'a'..b'e' {
            o.buf().extend_from_slice(b"VALUE k\r\n");
            o.value(&big(c));
            o.buf().extend_from_slice(b"\r\n");
        }
        let mut w = Dribble(Vec::new());
        o.write_to(&mut w).await.unwrap();
        assert_eq!(w.0, o.into_vec());
    }

    /// More values than the stack holds: the same bytes through the heap's slices.
    #[tokio::test]
    async fn many_pinned_values_resume() {
        let mut o = Out::default();
        for c in b'a'..b'a' + 2 * FEW_PINNED as u8 {
            o.buf().extend_from_slice(b"VALUE k\r\n");
            o.value(&big(c));
            o.buf().extend_from_slice(b"\r\n");
        }
        o.buf().extend_from_slice(b"END\r\n");
        let mut w = Dribble(Vec::new());
        o.write_to(&mut w).await.unwrap();
        assert_eq!(w.0.len(), o.len());
        assert_eq!(w.0, o.into_vec());
    }
}
