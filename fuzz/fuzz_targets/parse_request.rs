//! Any bytes, split anywhere: the parsers must not panic, must not claim
//! more input than given, and must give the same frames for any split
//! (see `cache_proto::fuzzing::check`). The first two bytes pick the split.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = u16::from_le_bytes([data[0], data[1]]) as usize;
    let data = &data[2..];
    cache_proto::fuzzing::check(data, split % (data.len() + 1), 1024);
});
