//! Fuzz target `resp_frame`: RESP request parsing (multibulk and inline,
//! pipelined, split at any point), with the default limits and tight ones.
#![no_main]

use bytes::BytesMut;
use strata_server::resp::{parse_request, Limits};

fn parse_all(data: &[u8], limits: &Limits, split: usize) {
    let mut buf = BytesMut::new();
    let (a, b) = data.split_at(split.min(data.len()));
    for part in [a, b] {
        buf.extend_from_slice(part);
        loop {
            match parse_request(&mut buf, limits) {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => break,
            }
        }
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let split = data.first().copied().unwrap_or(0) as usize;
    parse_all(data, &Limits::default(), split);
    let tight = Limits {
        max_bulk_len: 64,
        max_multibulk_len: 8,
        max_inline_len: 32,
        max_query_buffer: 256,
        unauthenticated: false,
    };
    parse_all(data, &tight, split);
    // A client that must still authenticate: Redis's own limits on top.
    parse_all(data, &Limits::default().unauthenticated(), split);
});
