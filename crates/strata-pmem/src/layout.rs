//! On-PM layout of the region header. These numbers are written to PM and
//! must never be renumbered; the byte layout is in FORMAT.md, "PM region".

/// Bytes reserved for the superblock at the start of the region.
pub const SUPERBLOCK_BYTES: u64 = 4096;
/// Number of 8-byte root words the engine may publish in the superblock.
pub const ROOT_WORDS: usize = 64;

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"STRATAPM");
pub(crate) const FORMAT_VERSION: u32 = 1;

pub(crate) const OFF_MAGIC: u64 = 0;
pub(crate) const OFF_VERSION: u64 = 8;
pub(crate) const OFF_REGION_LEN: u64 = 16;
pub(crate) const OFF_SLOT_BYTES: u64 = 24;
pub(crate) const OFF_SLOT_COUNT: u64 = 32;
pub(crate) const OFF_TABLE: u64 = 40;
pub(crate) const OFF_DATA: u64 = 48;
pub(crate) const OFF_ID: u64 = 56;
pub(crate) const OFF_ROOTS: u64 = 64;

/// Geometry of a region, as recorded in its superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub region_len: u64,
    pub slot_bytes: u64,
    pub slot_count: u64,
    pub table_off: u64,
    pub data_off: u64,
}

impl Geometry {
    /// Lays out a region of `region_len` bytes in slots of `slot_bytes`.
    pub fn plan(region_len: u64, slot_bytes: u64) -> Option<Geometry> {
        if slot_bytes == 0 || !slot_bytes.is_multiple_of(4096) {
            return None;
        }
        let table_off = SUPERBLOCK_BYTES;
        // Each slot costs its bytes plus one head word; the table is padded
        // to 4 KiB and slots start on a slot-size boundary (at most 2 MiB)
        // so that huge pages and DAX mappings stay aligned.
        let align = slot_bytes.min(2 << 20);
        let mut slot_count = region_len.checked_sub(table_off)? / (slot_bytes + 8);
        loop {
            if slot_count == 0 {
                return None;
            }
            let table_bytes = round_up(slot_count * 8, 4096);
            let data_off = round_up(table_off + table_bytes, align);
            if data_off + slot_count * slot_bytes <= region_len {
                return Some(Geometry { region_len, slot_bytes, slot_count, table_off, data_off });
            }
            slot_count -= 1;
        }
    }

    /// Byte offset of slot `i`.
    pub fn slot_off(&self, i: u64) -> u64 {
        self.data_off + i * self.slot_bytes
    }

    /// Byte offset of the head word of slot `i`.
    pub fn head_off(&self, i: u64) -> u64 {
        self.table_off + i * 8
    }
}

pub(crate) fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_fits_in_region() {
        for (len, slot) in [(1 << 20, 64 << 10), (64 << 20, 1 << 20), (4 << 30, 4 << 20)] {
            let g = Geometry::plan(len, slot).unwrap();
            assert!(g.data_off + g.slot_count * g.slot_bytes <= len);
            assert!(g.table_off + g.slot_count * 8 <= g.data_off);
            assert!(g.slot_count > 0);
        }
        assert_eq!(Geometry::plan(16384, 4096).unwrap().slot_count, 2);
        assert!(Geometry::plan(4096, 4096).is_none());
        assert!(Geometry::plan(1 << 20, 1000).is_none());
    }
}
