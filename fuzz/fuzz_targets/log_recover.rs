//! Fuzz target `log_recover`: see `strata_stress::fuzz_targets::log_recover`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_stress::fuzz_targets::log_recover(data);
});
