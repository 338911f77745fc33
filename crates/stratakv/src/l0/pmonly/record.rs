//! The pm-only level 0's MANIFEST record (FORMAT.md, "pm-only record").

use crate::coding::{put_u32, put_u64, put_varint, Reader};

/// Record format version.
const VERSION: u8 = 1;

/// One L0 list as the record names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListRecord {
    /// List id (newer lists have larger ids).
    pub id: u64,
    /// Its head block in the root extent.
    pub block: u32,
    /// Numbers of the log extents holding its nodes.
    pub logs: Vec<u64>,
}

/// What the MANIFEST keeps of the pm-only level 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// The root extent (head blocks): slot, slots, number.
    pub root: (u64, u64, u64),
    /// PM regions the lists are braided over.
    pub regions: u32,
    /// The next list id.
    pub next_list_id: u64,
    /// The L0 list a zipper merge was moving into L1 (0: none): recovery
    /// finishes it.
    pub merging: u64,
    /// L0 lists, newest first.
    pub lists: Vec<ListRecord>,
    /// Numbers of the log extents holding L1 nodes.
    pub l1_logs: Vec<u64>,
    /// Numbers of the relocation extents (kind 5) holding L1 nodes that
    /// log cleaning moved.
    pub l1_relocs: Vec<u64>,
    /// The next relocation extent number.
    pub next_reloc: u64,
}

fn put_logs(out: &mut Vec<u8>, logs: &[u64]) {
    put_varint(out, logs.len() as u64);
    for &l in logs {
        put_varint(out, l);
    }
}

fn logs(r: &mut Reader<'_>) -> Option<Vec<u64>> {
    let n = r.varint()? as usize;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        out.push(r.varint()?);
    }
    Some(out)
}

impl Record {
    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        put_u64(&mut out, self.root.0);
        put_u64(&mut out, self.root.1);
        put_u64(&mut out, self.root.2);
        put_u32(&mut out, self.regions);
        put_u64(&mut out, self.next_list_id);
        put_u64(&mut out, self.merging);
        put_varint(&mut out, self.lists.len() as u64);
        for l in &self.lists {
            put_u64(&mut out, l.id);
            put_u32(&mut out, l.block);
            put_logs(&mut out, &l.logs);
        }
        put_logs(&mut out, &self.l1_logs);
        put_logs(&mut out, &self.l1_relocs);
        put_varint(&mut out, self.next_reloc);
        out
    }

    /// Decodes `b`; the error says what is wrong.
    pub fn decode(b: &[u8]) -> Result<Record, String> {
        let mut r = Reader::new(b);
        let bad = || "pm-only record does not decode".to_string();
        match r.u8() {
            Some(VERSION) => {}
            Some(v) => return Err(format!("pm-only record version {v} is not known to this build")),
            None => return Err(bad()),
        }
        let rec = (|| {
            let root = (r.u64()?, r.u64()?, r.u64()?);
            let regions = r.u32()?;
            let next_list_id = r.u64()?;
            let merging = r.u64()?;
            let n = r.varint()? as usize;
            let mut lists = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                lists.push(ListRecord { id: r.u64()?, block: r.u32()?, logs: logs(&mut r)? });
            }
            let l1_logs = logs(&mut r)?;
            let l1_relocs = logs(&mut r)?;
            let next_reloc = r.varint()?;
            Some(Record { root, regions, next_list_id, merging, lists, l1_logs, l1_relocs, next_reloc })
        })()
        .ok_or_else(bad)?;
        if !r.is_empty() || rec.regions == 0 || rec.regions > 15 {
            return Err(bad());
        }
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_and_rejects_damage() {
        let rec = Record {
            root: (3, 1, 9),
            regions: 2,
            next_list_id: 7,
            merging: 5,
            lists: vec![
                ListRecord { id: 6, block: 2, logs: vec![40, 41] },
                ListRecord { id: 5, block: 1, logs: vec![39] },
            ],
            l1_logs: vec![12, 30, 38],
            l1_relocs: vec![2, 3],
            next_reloc: 4,
        };
        let b = rec.encode();
        assert_eq!(Record::decode(&b).unwrap(), rec);
        assert!(Record::decode(&b[..b.len() - 1]).is_err());
        let mut v2 = b.clone();
        v2[0] = 2;
        assert!(Record::decode(&v2).unwrap_err().contains("version 2"));
    }
}
