//! A directory's place record: its parent's id and its name there, kept in
//! the xattr of its id marker (`ids.rs` makes the marker, `dirs.rs` walks
//! the records to find a directory by id). This is the record's format and
//! nothing else.

use xlator::names::{check_name, is_hidden};
use xlator::FileId;

/// Where a directory's marker records its place.
pub const PLACE_XATTR: &str = "user.imca.parent";
/// Places a record holds: the current one and, during a rename, the old one.
const MAX_PLACES: usize = 2;

/// A directory's place: the id of its parent and its name there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub parent: FileId,
    pub name: String,
}

/// `<parent hex>/<name>`, places separated by NUL (neither may be in a name).
pub(crate) fn encode(places: &[Place]) -> Vec<u8> {
    let parts: Vec<String> = places.iter().map(|p| format!("{}/{}", p.parent.to_hex(), p.name)).collect();
    parts.join("\0").into_bytes()
}

/// The places in a record; empty when there is none or it is malformed
/// (then the directory is found by path and the record written anew).
pub(crate) fn decode(v: &[u8]) -> Vec<Place> {
    let Ok(s) = std::str::from_utf8(v) else { return Vec::new() };
    let mut out = Vec::new();
    for part in s.split('\0').take(MAX_PLACES) {
        let Some((hex, name)) = part.split_once('/') else { return Vec::new() };
        let Some(parent) = FileId::from_hex(hex) else { return Vec::new() };
        if check_name(name).is_err() || is_hidden(parent, name) {
            return Vec::new();
        }
        out.push(Place { parent, name: name.to_string() });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_odd_ones_are_empty() {
        let a = Place { parent: FileId::ROOT, name: "a b\nc".into() };
        let b = Place { parent: FileId(1 << 127 | 5), name: "x".into() };
        assert_eq!(decode(&encode(&[a.clone(), b.clone()])), vec![a.clone(), b]);
        assert_eq!(decode(&encode(std::slice::from_ref(&a))), vec![a]);
        for bad in [&b""[..], b"zz/a", b"00000000000000000000000000000001", b"00000000000000000000000000000001/..",
            b"00000000000000000000000000000001/.imca", b"00000000000000000000000000000002/a/b"] {
            assert!(decode(bad).is_empty(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
