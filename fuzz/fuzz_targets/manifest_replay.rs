//! Fuzz target `manifest_replay`: see `strata_stress::fuzz_targets::manifest_replay`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_stress::fuzz_targets::manifest_replay(data);
});
