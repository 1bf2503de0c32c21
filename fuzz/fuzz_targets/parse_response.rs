//! Any bytes a server might send, split anywhere: the client's response
//! parser must not panic, must not claim more input than given, must keep
//! every slice of a response inside the bytes it used, must read back what
//! it composes, and must give the same responses for any split (see
//! `cache_proto::fuzzing::check_responses`). The first two bytes pick the split.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = u16::from_le_bytes([data[0], data[1]]) as usize;
    let data = &data[2..];
    cache_proto::fuzzing::check_responses(data, split % (data.len() + 1), 1024);
});
