//! Number parsing with the exact quirks of memcached's `safe_strto*` helpers
//! (which wrap C's `strtoull`/`strtol`): leading whitespace and a sign are
//! accepted, the number must be followed by whitespace or the end, and
//! `strtol` results are truncated to 32 bits by the caller without a range
//! check. Matching these quirks is what makes replies byte-identical.

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits optional leading whitespace and sign, then the digits; `None` if
/// there are no digits, the value overflows, or a non-space follows them.
fn digits(s: &[u8]) -> Option<(bool, u64)> {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add(u64::from(s[i] - b'0'))?;
        i += 1;
    }
    if i == start {
        return None;
    }
    if i < s.len() && !is_c_space(s[i]) {
        return None;
    }
    Some((neg, v))
}

/// `safe_strtoull`: unsigned 64-bit; a negative sign is only rejected when the
/// wrapped result would look negative as a signed number (as in memcached).
pub fn strtoull(s: &[u8]) -> Option<u64> {
    let (neg, v) = digits(s)?;
    let r = if neg { v.wrapping_neg() } else { v };
    if neg && (r as i64) < 0 {
        return None;
    }
    Some(r)
}

/// `safe_strtoul` on a 64-bit host, stored into a `uint32_t` (so it truncates).
pub fn strtoul32(s: &[u8]) -> Option<u32> {
    strtoull(s).map(|v| v as u32)
}

/// `safe_strtol` (64-bit `long`) truncated to `int32_t` by the caller.
pub fn strtol32(s: &[u8]) -> Option<i32> {
    let (neg, v) = digits(s)?;
    if neg {
        if v > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg() as i32)
    } else {
        if v > i64::MAX as u64 {
            return None;
        }
        Some(v as i64 as i32)
    }
}

/// Value of a stored item for incr/decr: memcached runs `safe_strtoull` over
/// the data, which is followed by "\r\n" in its memory layout.
pub fn item_number(data: &[u8]) -> Option<u64> {
    if data.is_empty() {
        return None;
    }
    // The trailing "\r" that memcached sees counts as whitespace: emulate by
    // treating the end of data as a valid terminator (digits() already does).
    strtoull(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quirks() {
        assert_eq!(strtoull(b"12"), Some(12));
        assert_eq!(strtoull(b" 12"), Some(12));
        assert_eq!(strtoull(b"+5"), Some(5));
        assert_eq!(strtoull(b"-1"), None);
        assert_eq!(strtoull(b"12a"), None);
        assert_eq!(strtoull(b"18446744073709551616"), None);
        assert_eq!(strtoul32(b"4294967296"), Some(0));
        assert_eq!(strtol32(b"4294967297"), Some(1));
        assert_eq!(strtol32(b"-1"), Some(-1));
        assert_eq!(strtol32(b"x"), None);
        assert_eq!(item_number(b"9 "), Some(9));
        assert_eq!(item_number(b""), None);
    }
}
