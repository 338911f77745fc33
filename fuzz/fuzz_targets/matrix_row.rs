//! Fuzz target `matrix_row`: see `strata_stress::fuzz_targets::matrix_row`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_stress::fuzz_targets::matrix_row(data);
});
