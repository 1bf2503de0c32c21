//! The binary protocol: 24-byte headers, big-endian fields.
//!
//! [`parse`] validates a request the way memcached's `dispatch_bin_command`
//! does (extras/key/body lengths per opcode). A malformed frame gets
//! "Invalid arguments" and the connection is closed, as memcached does; an
//! unknown opcode gets "Unknown command" with its body discarded; a value
//! over the item limit gets "Too large." with its value discarded — in all
//! cases without buffering an attacker-chosen length.

use crate::{Parse, MAX_KEY_LEN};

pub const HEADER_LEN: usize = 24;
pub const REQ_MAGIC: u8 = 0x80;
pub const RES_MAGIC: u8 = 0x81;
/// The largest SASL data accepted (a longer one closes the connection).
pub const MAX_SASL_DATA: usize = 4096;

/// Opcodes (memcached's `protocol_binary_command`).
pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    /// memcached 1.6.18 answers "Unknown command" to it; so do we
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
    /// SASL (memcached `-S`): the mechanisms offered, a login, its next step
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
}

/// Response status codes and memcached's message for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Status {
    Ok = 0x00,
    KeyNotFound = 0x01,
    KeyExists = 0x02,
    TooLarge = 0x03,
    Invalid = 0x04,
    NotStored = 0x05,
    DeltaBadval = 0x06,
    /// memcached answers a refused command (a flush_all under `-F`) with it
    AuthError = 0x20,
    /// SASL: the mechanism needs another step (never sent for PLAIN)
    AuthContinue = 0x21,
    UnknownCommand = 0x81,
    NoMemory = 0x82,
}

impl Status {
    pub fn message(self) -> &'static [u8] {
        match self {
            Status::Ok => b"",
            Status::KeyNotFound => b"Not found",
            Status::KeyExists => b"Data exists for key.",
            Status::TooLarge => b"Too large.",
            Status::Invalid => b"Invalid arguments",
            Status::NotStored => b"Not stored.",
            Status::DeltaBadval => b"Non-numeric server-side value for incr or decr",
            Status::AuthError => b"Auth failure.",
            Status::AuthContinue => b"Auth continue",
            Status::UnknownCommand => b"Unknown command",
            Status::NoMemory => b"Out of memory allocating item",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub magic: u8,
    pub opcode: u8,
    pub keylen: u16,
    pub extlen: u8,
    pub datatype: u8,
    /// vbucket in requests, status in responses
    pub status: u16,
    pub bodylen: u32,
    pub opaque: u32,
    pub cas: u64,
}

impl Header {
    pub fn decode(b: &[u8]) -> Option<Header> {
        let b = b.get(..HEADER_LEN)?;
        Some(Header {
            magic: b[0],
            opcode: b[1],
            keylen: u16::from_be_bytes([b[2], b[3]]),
            extlen: b[4],
            datatype: b[5],
            status: u16::from_be_bytes([b[6], b[7]]),
            bodylen: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            opaque: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            cas: u64::from_be_bytes(b[16..24].try_into().unwrap()),
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.magic);
        out.push(self.opcode);
        out.extend_from_slice(&self.keylen.to_be_bytes());
        out.push(self.extlen);
        out.push(self.datatype);
        out.extend_from_slice(&self.status.to_be_bytes());
        out.extend_from_slice(&self.bodylen.to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
    }
}

/// A complete, validated request borrowing from the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub header: Header,
    pub extras: &'a [u8],
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl Request<'_> {
    /// Quiet variants suppress success replies (and GetQ/GetKQ misses).
    pub fn quiet(&self) -> bool {
        use op::*;
        matches!(
            self.header.opcode,
            GETQ | GETKQ | SETQ | ADDQ | REPLACEQ | DELETEQ | INCREMENTQ | DECREMENTQ | QUITQ | FLUSHQ | APPENDQ | PREPENDQ | GATQ | GATKQ
        )
    }

    pub fn extra_u32(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.extras[at..at + 4].try_into().unwrap())
    }

    pub fn extra_u64(&self, at: usize) -> u64 {
        u64::from_be_bytes(self.extras[at..at + 8].try_into().unwrap())
    }

    /// Encodes a request (tests, fuzzing, clients).
    pub fn encode(opcode: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + extras.len() + key.len() + value.len());
        Header {
            magic: REQ_MAGIC,
            opcode,
            keylen: key.len() as u16,
            extlen: extras.len() as u8,
            datatype: 0,
            status: 0,
            bodylen: (extras.len() + key.len() + value.len()) as u32,
            opaque,
            cas,
        }
        .encode(&mut out);
        out.extend_from_slice(extras);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Request(Request<'a>),
    /// Answer `status` (with its message); then discard `swallow` more bytes,
    /// or close the connection after the reply when `close`.
    Error { header: Header, status: Status, swallow: usize, close: bool },
    /// A storage request whose value is over the limit: "Too large.", discard
    /// `swallow` bytes of value; a `set` also drops the old item under `key`.
    TooLarge { header: Header, key: &'a [u8], swallow: usize },
}

fn is_store(opcode: u8) -> bool {
    use op::*;
    matches!(opcode, SET | SETQ | ADD | ADDQ | REPLACE | REPLACEQ | APPEND | APPENDQ | PREPEND | PREPENDQ)
}

/// Parses the first request of `buf` (which starts with [`REQ_MAGIC`], or the
/// connection is closed as memcached does for a bad magic byte).
pub fn parse(buf: &[u8], max_value: usize) -> Parse<Frame<'_>> {
    let Some(h) = Header::decode(buf) else { return Parse::Incomplete };
    if h.magic != REQ_MAGIC {
        return Parse::Close;
    }
    let (kl, el, bl) = (h.keylen as usize, h.extlen as usize, h.bodylen as usize);
    let invalid = |h: Header| Parse::Done(Frame::Error { header: h, status: Status::Invalid, swallow: 0, close: true }, HEADER_LEN);
    if kl > MAX_KEY_LEN || kl + el > bl {
        return invalid(h);
    }
    use op::*;
    let ok = match h.opcode {
        GET | GETQ | GETK | GETKQ => el == 0 && bl == kl && kl > 0,
        SET | SETQ | ADD | ADDQ | REPLACE | REPLACEQ => el == 8 && kl != 0,
        APPEND | APPENDQ | PREPEND | PREPENDQ => el == 0 && kl != 0,
        NOOP | QUIT | QUITQ | VERSION => el == 0 && kl == 0 && bl == 0,
        FLUSH | FLUSHQ => kl == 0 && bl == el && (el == 0 || el == 4),
        DELETE | DELETEQ => kl > 0 && el == 0 && bl == kl,
        INCREMENT | INCREMENTQ | DECREMENT | DECREMENTQ => kl > 0 && el == 20 && bl == kl + 20,
        STAT => el == 0 && bl == kl,
        TOUCH | GAT | GATQ | GATK | GATKQ => el == 4 && kl != 0 && bl == kl + 4,
        SASL_LIST_MECHS => el == 0 && kl == 0 && bl == 0,
        // a mechanism name and its data, which is small (PLAIN: \0user\0password)
        SASL_AUTH | SASL_STEP => el == 0 && kl > 0 && bl - kl <= MAX_SASL_DATA,
        _ => {
            return Parse::Done(
                Frame::Error { header: h, status: Status::UnknownCommand, swallow: bl, close: false },
                HEADER_LEN,
            )
        }
    };
    if !ok {
        return invalid(h);
    }
    if is_store(h.opcode) && bl - el - kl > max_value {
        let head = HEADER_LEN + el + kl;
        let Some(key) = buf.get(HEADER_LEN + el..head) else { return Parse::Incomplete };
        return Parse::Done(Frame::TooLarge { header: h, key, swallow: bl - el - kl }, head);
    }
    let Some(body) = buf.get(HEADER_LEN..HEADER_LEN + bl) else { return Parse::Incomplete };
    let req = Request { header: h, extras: &body[..el], key: &body[el..el + kl], value: &body[el + kl..] };
    Parse::Done(Frame::Request(req), HEADER_LEN + bl)
}

/// Appends one response packet.
#[allow(clippy::too_many_arguments)]
pub fn response(out: &mut Vec<u8>, opcode: u8, status: u16, opaque: u32, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) {
    Header {
        magic: RES_MAGIC,
        opcode,
        keylen: key.len() as u16,
        extlen: extras.len() as u8,
        datatype: 0,
        status,
        bodylen: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
    }
    .encode(out);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Appends an error response carrying memcached's message for `status`.
pub fn error(out: &mut Vec<u8>, h: &Header, status: Status) {
    response(out, h.opcode, status as u16, h.opaque, 0, &[], &[], status.message());
}
