//! Fuzz target `restore_payload`: RESTORE's decoder (`strata_server::rdb`)
//! on any value bytes, sealed with a valid version and checksum so that the
//! decoder itself is exercised; what it accepts must DUMP and decode back
//! to the same value.
#![no_main]

use strata_server::rdb::{dump, restore, seal};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(v) = restore(&seal(data.to_vec())) {
        assert_eq!(restore(&dump(&v)), Ok(v));
    }
    // Unsealed bytes are refused, never a panic.
    let _ = restore(data);
});
