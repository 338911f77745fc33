//! A cache prefetch hint for DRAM structures (skiplist nodes, hash slots):
//! searches that step through several independent keys at once ask for the
//! next node of each key ahead of use, so their cache misses overlap.
#![allow(unsafe_code)]

/// Asks the CPU to bring the cache line holding `r` into its caches. A hint
/// only: it never changes what a later load returns.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` reads nothing into registers, cannot fault and
    // has no effect visible to the program; the address comes from a live
    // reference, so it is even a valid one. SSE, which the instruction
    // needs, is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
