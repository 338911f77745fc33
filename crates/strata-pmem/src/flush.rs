//! CPU cache-line write-back and store fences.
#![allow(unsafe_code)]

use std::sync::atomic::{fence, Ordering};

/// Size of a CPU cache line, the unit in which PM is flushed.
pub const CACHE_LINE: u64 = 64;

/// Which instruction writes a cache line back to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineFlush {
    /// `clwb`: write back, keep the line cached (best).
    Clwb,
    /// `clflushopt`: write back and evict, weakly ordered.
    Clflushopt,
    /// `clflush`: write back and evict, strongly ordered (always present on x86-64).
    Clflush,
    /// Not x86-64: no user-level flush; only ordering is possible.
    None,
}

impl LineFlush {
    /// Picks the best instruction this CPU has.
    pub fn detect() -> LineFlush {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: cpuid is available on every x86-64 CPU; leaf 7 subleaf
            // 0 is defined whenever leaf 0 reports max leaf >= 7, checked here.
            #[allow(unused_unsafe)]
            let (max_leaf, ebx7) = unsafe {
                let max = std::arch::x86_64::__cpuid(0).eax;
                let ebx = if max >= 7 { std::arch::x86_64::__cpuid_count(7, 0).ebx } else { 0 };
                (max, ebx)
            };
            let _ = max_leaf;
            if ebx7 & (1 << 24) != 0 {
                return LineFlush::Clwb;
            }
            if ebx7 & (1 << 23) != 0 {
                return LineFlush::Clflushopt;
            }
            LineFlush::Clflush
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            LineFlush::None
        }
    }

    /// Writes back every cache line overlapping `[addr, addr+len)`.
    ///
    /// The addresses are only used as operands of flush instructions, which
    /// neither read nor write the bytes from the program's point of view, so
    /// this is sound for any address inside a live mapping.
    pub fn flush_range(self, addr: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        let start = (addr as usize) & !63;
        let end = addr as usize + len;
        let mut line = start;
        while line < end {
            self.flush_line(line as *const u8);
            line += 64;
        }
    }

    #[inline]
    fn flush_line(self, p: *const u8) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller passes an address inside a live mapping (see
        // flush_range); clwb/clflushopt/clflush on such an address have no
        // effect on program-visible memory contents.
        unsafe {
            match self {
                LineFlush::Clwb => {
                    std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                LineFlush::Clflushopt => {
                    std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                LineFlush::Clflush => {
                    std::arch::asm!("clflush [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                LineFlush::None => {}
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }
}

/// A store fence: earlier stores and line write-backs complete before later stores.
#[inline]
pub(crate) fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence only orders memory operations.
    unsafe {
        std::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    fence(Ordering::SeqCst);
}

/// Busy-waits for `ns` nanoseconds (emulated PM write latency).
pub(crate) fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let start = std::time::Instant::now();
    let d = std::time::Duration::from_nanos(ns);
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}
