//! Fuzz target `sstable_open`: see `strata_stress::fuzz_targets::sstable_open`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_stress::fuzz_targets::sstable_open(data);
});
