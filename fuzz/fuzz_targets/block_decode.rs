//! Fuzz target `block_decode`: see `strata_stress::fuzz_targets::block_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_stress::fuzz_targets::block_decode(data);
});
