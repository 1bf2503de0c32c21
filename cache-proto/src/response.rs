//! What a server answers a text-protocol command, as a type both halves
//! share: the cache node composes its replies with [`Response::encode`],
//! and a client ([`crate::client::parse()`]) reads the same bytes back into
//! the same value. One type for both directions is what the round-trip
//! tests (`tests/round_trip.rs`) and the response fuzz target check.
//!
//! `B` is how the response holds its bytes (key, data, messages): `&[u8]`
//! borrowed from a read buffer when parsing, or anything a caller maps them
//! to with [`Response::map`] (the bank keeps `Bytes` slices of the buffer
//! the node wrote into, so a value is never copied).
//!
//! Meta-protocol answers (`HD`, `VA`, `EN` ...) are not here: the cache node
//! composes them in `exec_meta.rs`, and no client of ours sends meta commands.

use std::fmt;

use crate::text::reply;

/// A one-word answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// a storage command stored the value
    Stored,
    /// `add` of a present key, `replace`/`append`/`prepend` of an absent one
    NotStored,
    /// `cas` whose unique no longer matches
    Exists,
    /// `cas`, `delete`, `incr`, `touch` of an absent key
    NotFound,
    Deleted,
    Touched,
    /// `flush_all`, `verbosity`
    Ok,
    /// the end of a get's values or of a `stats` listing
    End,
}

impl Status {
    /// Every status, for tests and lookups.
    pub const ALL: [Status; 8] = [
        Status::Stored,
        Status::NotStored,
        Status::Exists,
        Status::NotFound,
        Status::Deleted,
        Status::Touched,
        Status::Ok,
        Status::End,
    ];

    /// The word on the wire.
    pub fn word(self) -> &'static str {
        match self {
            Status::Stored => "STORED",
            Status::NotStored => "NOT_STORED",
            Status::Exists => "EXISTS",
            Status::NotFound => "NOT_FOUND",
            Status::Deleted => "DELETED",
            Status::Touched => "TOUCHED",
            Status::Ok => "OK",
            Status::End => "END",
        }
    }

    pub fn from_word(w: &[u8]) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.word().as_bytes() == w)
    }

    /// Appends the line, "\r\n" included.
    pub fn encode(self, out: &mut Vec<u8>) {
        reply::line(out, self.word());
    }
}

/// One hit of a `get`/`gets`: `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Value<B> {
    pub key: B,
    pub flags: u32,
    pub data: B,
    /// the CAS unique, sent for `gets` only
    pub cas: Option<u64>,
}

/// One response: a line, or a value with its data block. What a line can
/// hold follows from the framing: keys and stat names are single non-empty
/// tokens, and no field but a value's data contains "\r\n".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Response<B> {
    Value(Value<B>),
    Status(Status),
    /// `incr`/`decr`: the new value
    Number(u64),
    /// `VERSION <version>`
    Version(B),
    /// `STAT <name> <value>` (one line of a `stats` listing, ended by END)
    Stat { name: B, value: B },
    /// `ERROR` (an unknown command), or `ERROR: <why>` (e.g. a refused shutdown)
    Error(B),
    /// `CLIENT_ERROR <why>`: the request was malformed
    ClientError(B),
    /// `SERVER_ERROR <why>`: the server could not do it (out of memory, too large)
    ServerError(B),
}

impl<B> Response<B> {
    /// The same response with its bytes held as `f` makes them.
    pub fn map<C>(self, mut f: impl FnMut(B) -> C) -> Response<C> {
        match self {
            Response::Value(v) => Response::Value(Value { key: f(v.key), flags: v.flags, data: f(v.data), cas: v.cas }),
            Response::Status(s) => Response::Status(s),
            Response::Number(n) => Response::Number(n),
            Response::Version(v) => Response::Version(f(v)),
            Response::Stat { name, value } => Response::Stat { name: f(name), value: f(value) },
            Response::Error(m) => Response::Error(f(m)),
            Response::ClientError(m) => Response::ClientError(f(m)),
            Response::ServerError(m) => Response::ServerError(f(m)),
        }
    }

    /// `ERROR`, `CLIENT_ERROR` or `SERVER_ERROR`: the command failed.
    pub fn is_error(&self) -> bool {
        matches!(self, Response::Error(_) | Response::ClientError(_) | Response::ServerError(_))
    }
}

impl<B: AsRef<[u8]>> Response<B> {
    /// Appends the response as memcached writes it (the cache node's replies).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            // the hot path: straight from the item into the output
            Response::Value(v) => reply::value(out, v.key.as_ref(), v.flags, v.data.as_ref(), v.cas),
            _ => {
                self.line(out);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// Appends the line without "\r\n" (of a value: its header line).
    fn line(&self, out: &mut Vec<u8>) {
        // `word`, then `sep` and `rest` unless `rest` is empty
        let mut word_rest = |word: &str, sep: &str, rest: &[u8]| {
            out.extend_from_slice(word.as_bytes());
            if !rest.is_empty() {
                out.extend_from_slice(sep.as_bytes());
                out.extend_from_slice(rest);
            }
        };
        match self {
            Response::Value(v) => {
                reply::value_header(out, v.key.as_ref(), v.flags, v.data.as_ref().len(), v.cas);
                out.truncate(out.len() - 2);
            }
            Response::Status(s) => word_rest(s.word(), "", b""),
            Response::Number(n) => reply::push_u64(out, *n),
            Response::Version(v) => word_rest("VERSION", " ", v.as_ref()),
            Response::Stat { name, value } => {
                word_rest("STAT", " ", name.as_ref());
                word_rest("", " ", value.as_ref());
            }
            Response::Error(m) => word_rest("ERROR", ": ", m.as_ref()),
            Response::ClientError(m) => word_rest("CLIENT_ERROR", " ", m.as_ref()),
            Response::ServerError(m) => word_rest("SERVER_ERROR", " ", m.as_ref()),
        }
    }
}

/// The response's line as it appeared on the wire (of a value: its header
/// line), for logs and error messages.
impl<B: AsRef<[u8]>> fmt::Display for Response<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = Vec::new();
        self.line(&mut line);
        f.write_str(&String::from_utf8_lossy(&line))
    }
}
