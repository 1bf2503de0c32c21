//! What a volume may be called: 1 ..= 48 characters of `A-Z a-z 0-9 . _ -`.
//!
//! The name is used verbatim in every cache key (`imca:<volume>:<epoch>:…`,
//! see `cache_bank::keys`), so two volumes sharing a bank share no key as
//! long as their names differ — which only holds if no name is rewritten on
//! the way into a key. Hence one rule, checked wherever a name enters (the
//! options table, so: `volume.json` at load, `imca storage --volume`,
//! SetVolumeConfig), and no mapping anywhere.
//!
//! Why these characters: memcached keys may not hold spaces or control
//! characters, and `:` separates the key's fields (a name with `:` could
//! read as a name plus an epoch). Why 48: the longest key (a data block:
//! 93 bytes around the name, with a 20-digit epoch and block number) stays
//! far below memcached's 250-byte limit, leaving room for new key kinds;
//! 48 is also what the key builder kept of a name before this rule.

/// Longest volume name, in bytes (all allowed characters are ASCII).
pub const MAX_NAME_LEN: usize = 48;

/// The characters a name may use, for messages and the options table.
pub const NAME_CHARS: &str = "A-Z a-z 0-9 . _ -";

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Is `name` a valid volume name? The error says what is wrong with it.
pub fn check_name(name: &str) -> Result<(), String> {
    let rule = format!("a volume name is 1 ..= {MAX_NAME_LEN} characters of {NAME_CHARS}");
    if name.is_empty() {
        return Err(format!("the volume name is empty: {rule}"));
    }
    if let Some(c) = name.chars().find(|c| !allowed(*c)) {
        return Err(format!("volume name {name:?} contains {c:?}: {rule}"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("volume name {name:?} is {} characters long: {rule}", name.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_rule_accepts() {
        for ok in ["vol0", "a", "a.b", "a_b", "A-Z.09_x", &"x".repeat(MAX_NAME_LEN)] {
            check_name(ok).unwrap();
        }
    }

    #[test]
    fn names_the_rule_refuses_say_why() {
        for (bad, why) in [
            ("", "empty"),
            ("a b", "' '"),
            ("a:b", "':'"),
            ("vol/1", "'/'"),
            ("ünï", "'ü'"),
            ("tab\t", "'\\t'"),
            (&"x".repeat(MAX_NAME_LEN + 1), "49 characters"),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains(why) && e.contains(NAME_CHARS), "{bad:?}: {e}");
        }
    }
}
