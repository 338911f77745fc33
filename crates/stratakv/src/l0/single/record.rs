//! Single-level's MANIFEST record: where the tree is, each table's key
//! counts (SLM-DB's total/alive), and the selective compaction whose tree
//! re-pointing may be unfinished (SLM-DB's "recovery list").

use std::collections::BTreeMap;

use crate::coding::{put_varint, Reader};

/// Record format version.
const VERSION: u8 = 1;

/// Keys a table was written with, and how many of them the tree still
/// points at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyCounts {
    /// Distinct user keys in the table when written.
    pub total: u64,
    /// Of those, the ones whose newest version the tree finds in it.
    pub alive: u64,
}

/// A selective compaction recorded with the edit that added its outputs:
/// until the edit that deletes its inputs, recovery finishes re-pointing
/// the tree from `inputs` to `outputs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    /// Tables merged.
    pub inputs: Vec<u64>,
    /// Tables written.
    pub outputs: Vec<u64>,
}

/// The decoded record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Record {
    /// Region offset of the tree's anchor (see `pmtree`).
    pub anchor: u64,
    /// Per table.
    pub counts: BTreeMap<u64, KeyCounts>,
    /// The compaction in flight, if any.
    pub pending: Option<Pending>,
    /// Tables a flush added whose keys may not all be in the tree yet
    /// (SLM-DB's recovery list): recovery indexes them again before any
    /// later flush, and no compaction takes them meanwhile.
    pub flushing: Vec<u64>,
}

impl Record {
    /// The MANIFEST bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![VERSION];
        put_varint(&mut b, self.anchor);
        put_varint(&mut b, self.counts.len() as u64);
        for (n, c) in &self.counts {
            put_varint(&mut b, *n);
            put_varint(&mut b, c.total);
            put_varint(&mut b, c.alive);
        }
        match &self.pending {
            None => b.push(0),
            Some(p) => {
                b.push(1);
                for list in [&p.inputs, &p.outputs] {
                    put_varint(&mut b, list.len() as u64);
                    for n in list {
                        put_varint(&mut b, *n);
                    }
                }
            }
        }
        put_varint(&mut b, self.flushing.len() as u64);
        for n in &self.flushing {
            put_varint(&mut b, *n);
        }
        b
    }

    /// Decodes `b`; the reason on failure.
    pub fn decode(b: &[u8]) -> Result<Record, String> {
        let mut r = Reader::new(b);
        let bad = |what: &str| format!("single-level record: {what}");
        if r.u8() != Some(VERSION) {
            return Err(bad("unknown version"));
        }
        let anchor = r.varint().ok_or_else(|| bad("truncated anchor"))?;
        let n = r.varint().ok_or_else(|| bad("truncated table count"))?;
        let mut counts = BTreeMap::new();
        for _ in 0..n {
            let (Some(f), Some(total), Some(alive)) = (r.varint(), r.varint(), r.varint()) else {
                return Err(bad("truncated key counts"));
            };
            counts.insert(f, KeyCounts { total, alive });
        }
        let pending = match r.u8() {
            Some(0) => None,
            Some(1) => {
                let mut lists = [Vec::new(), Vec::new()];
                for list in &mut lists {
                    let n = r.varint().ok_or_else(|| bad("truncated compaction record"))?;
                    for _ in 0..n {
                        list.push(r.varint().ok_or_else(|| bad("truncated compaction record"))?);
                    }
                }
                let [inputs, outputs] = lists;
                Some(Pending { inputs, outputs })
            }
            _ => return Err(bad("bad compaction flag")),
        };
        let n = r.varint().ok_or_else(|| bad("truncated recovery list"))?;
        let mut flushing = Vec::new();
        for _ in 0..n {
            flushing.push(r.varint().ok_or_else(|| bad("truncated recovery list"))?);
        }
        if !r.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(Record { anchor, counts, pending, flushing })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_damage_is_an_error() {
        let mut r = Record { anchor: 4096, ..Default::default() };
        r.counts.insert(7, KeyCounts { total: 100, alive: 70 });
        r.counts.insert(9, KeyCounts { total: 5, alive: 5 });
        r.pending = Some(Pending { inputs: vec![7, 9], outputs: vec![12] });
        r.flushing = vec![13, 14];
        let b = r.encode();
        assert_eq!(Record::decode(&b), Ok(r));
        for cut in 0..b.len() {
            assert!(Record::decode(&b[..cut]).is_err(), "a record cut at {cut} decoded");
        }
    }
}
