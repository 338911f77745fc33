//! Version edits: the records of the MANIFEST.
//!
//! An edit is a sequence of fields, each `tag varint | length varint |
//! payload`. Tags are written to disk and must never be renumbered; an
//! unknown tag means the MANIFEST was written by a newer version and is
//! refused rather than misread.

use crate::coding::{put_bytes, put_varint, Reader};

use super::range_del::RangeTomb;
use super::FileMeta;

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE: u64 = 2;
const TAG_LAST_SEQ: u64 = 3;
const TAG_PM_REGION: u64 = 4;
const TAG_COMPACT_POINTER: u64 = 5;
const TAG_DELETED_FILE: u64 = 6;
const TAG_NEW_FILE: u64 = 7;
const TAG_L0_KIND: u64 = 8;
const TAG_MATRIX: u64 = 9;
const TAG_NEXT_LOG: u64 = 10;
const TAG_DELETED_RUN_FILE: u64 = 11;
const TAG_NEW_RUN_FILE: u64 = 12;
const TAG_RANGE_DEL: u64 = 13;
const TAG_RANGE_DEL_DONE: u64 = 14;
const TAG_PARTITION: u64 = 15;
const TAG_PARTITION_DROPPED: u64 = 16;
const TAG_NEXT_PARTITION: u64 = 17;
const TAG_SPLIT_POINT: u64 = 18;

/// A change to the file layout and counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Log extents with a smaller number hold nothing that is not in tables.
    pub log_number: Option<u64>,
    /// Next file number to hand out.
    pub next_file_number: Option<u64>,
    /// Highest sequence number whose data is in tables (or the matrix).
    pub last_sequence: Option<u64>,
    /// Id of the PM region this database's log lives in.
    pub pm_region_id: Option<u64>,
    /// Where the next compaction of a level starts (round robin).
    pub compact_pointers: Vec<(u32, Vec<u8>)>,
    /// Files removed: (level, number).
    pub deleted: Vec<(u32, u64)>,
    /// Files added.
    pub added: Vec<(u32, FileMeta)>,
    /// The L0 layout the database was created with (0 = sstable, 1 = matrix).
    pub l0_kind: Option<u8>,
    /// Level 0's record of its state outside tables (the matrix's rows),
    /// opaque here (see `L0State::record`).
    pub l0_record: Option<Vec<u8>>,
    /// Log numbers below this may have been handed out already and are
    /// never used again, even after recovery erased their extents' heads.
    pub next_log_number: Option<u64>,
    /// Files removed from runs: (run id, number).
    pub run_deleted: Vec<(u64, u64)>,
    /// Files added to runs: (run id, file); a new id starts a new run.
    pub run_added: Vec<(u64, FileMeta)>,
    /// Range tombstones added (`delete_range`, dropped partitions).
    pub range_dels_added: Vec<RangeTomb>,
    /// Range tombstones that hide nothing any more, removed.
    pub range_dels_removed: Vec<RangeTomb>,
    /// Partitions created: (name, id).
    pub partitions_added: Vec<(String, u32)>,
    /// Partitions dropped, by id (their keys' tombstone is in `range_dels_added`).
    pub partitions_dropped: Vec<u32>,
    /// Partition ids below this have been handed out and are never reused.
    pub next_partition: Option<u32>,
    /// Range-partition split points added (`Options::partition_split_bytes`).
    pub split_points: Vec<Vec<u8>>,
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut field = |tag: u64, payload: &[u8]| {
            put_varint(&mut out, tag);
            put_bytes(&mut out, payload);
        };
        let varint = |v: u64| {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            b
        };
        if let Some(v) = self.log_number {
            field(TAG_LOG_NUMBER, &varint(v));
        }
        if let Some(v) = self.next_file_number {
            field(TAG_NEXT_FILE, &varint(v));
        }
        if let Some(v) = self.last_sequence {
            field(TAG_LAST_SEQ, &varint(v));
        }
        if let Some(v) = self.pm_region_id {
            field(TAG_PM_REGION, &v.to_le_bytes());
        }
        if let Some(v) = self.l0_kind {
            field(TAG_L0_KIND, &[v]);
        }
        for (level, key) in &self.compact_pointers {
            let mut b = Vec::new();
            put_varint(&mut b, *level as u64);
            put_bytes(&mut b, key);
            field(TAG_COMPACT_POINTER, &b);
        }
        for (level, number) in &self.deleted {
            let mut b = Vec::new();
            put_varint(&mut b, *level as u64);
            put_varint(&mut b, *number);
            field(TAG_DELETED_FILE, &b);
        }
        for (level, f) in &self.added {
            field(TAG_NEW_FILE, &encode_file(*level as u64, f));
        }
        for (run, number) in &self.run_deleted {
            let mut b = Vec::new();
            put_varint(&mut b, *run);
            put_varint(&mut b, *number);
            field(TAG_DELETED_RUN_FILE, &b);
        }
        for (run, f) in &self.run_added {
            field(TAG_NEW_RUN_FILE, &encode_file(*run, f));
        }
        for (tag, list) in [(TAG_RANGE_DEL, &self.range_dels_added), (TAG_RANGE_DEL_DONE, &self.range_dels_removed)] {
            for t in list {
                let mut b = Vec::new();
                put_bytes(&mut b, &t.start);
                put_bytes(&mut b, &t.end);
                put_varint(&mut b, t.seq);
                field(tag, &b);
            }
        }
        for (name, id) in &self.partitions_added {
            let mut b = Vec::new();
            put_bytes(&mut b, name.as_bytes());
            put_varint(&mut b, *id as u64);
            field(TAG_PARTITION, &b);
        }
        for id in &self.partitions_dropped {
            field(TAG_PARTITION_DROPPED, &varint(*id as u64));
        }
        if let Some(v) = self.next_partition {
            field(TAG_NEXT_PARTITION, &varint(v as u64));
        }
        for k in &self.split_points {
            field(TAG_SPLIT_POINT, k);
        }
        if let Some(m) = &self.l0_record {
            field(TAG_MATRIX, m);
        }
        if let Some(v) = self.next_log_number {
            field(TAG_NEXT_LOG, &varint(v));
        }
        out
    }

    /// Decodes an edit; `Err(reason)` if malformed.
    pub fn decode(buf: &[u8]) -> Result<VersionEdit, String> {
        let mut e = VersionEdit::default();
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let tag = r.varint().ok_or("truncated tag")?;
            let payload = r.len_bytes().ok_or("truncated field")?;
            let mut p = Reader::new(payload);
            let short = || format!("field {tag} is malformed");
            match tag {
                TAG_LOG_NUMBER => e.log_number = Some(p.varint().ok_or_else(short)?),
                TAG_NEXT_FILE => e.next_file_number = Some(p.varint().ok_or_else(short)?),
                TAG_LAST_SEQ => e.last_sequence = Some(p.varint().ok_or_else(short)?),
                TAG_PM_REGION => e.pm_region_id = Some(p.u64().ok_or_else(short)?),
                TAG_L0_KIND => e.l0_kind = Some(p.u8().ok_or_else(short)?),
                TAG_COMPACT_POINTER => {
                    let level = p.varint32().ok_or_else(short)?;
                    let key = p.len_bytes().ok_or_else(short)?.to_vec();
                    e.compact_pointers.push((level, key));
                }
                TAG_DELETED_FILE => {
                    let level = p.varint32().ok_or_else(short)?;
                    let number = p.varint().ok_or_else(short)?;
                    e.deleted.push((level, number));
                }
                TAG_NEW_FILE => {
                    let level = p.varint32().ok_or_else(short)?;
                    e.added.push((level, decode_file(&mut p).ok_or_else(short)??));
                }
                TAG_DELETED_RUN_FILE => {
                    let run = p.varint().ok_or_else(short)?;
                    let number = p.varint().ok_or_else(short)?;
                    e.run_deleted.push((run, number));
                }
                TAG_NEW_RUN_FILE => {
                    let run = p.varint().ok_or_else(short)?;
                    e.run_added.push((run, decode_file(&mut p).ok_or_else(short)??));
                }
                TAG_RANGE_DEL | TAG_RANGE_DEL_DONE => {
                    let start = p.len_bytes().ok_or_else(short)?.to_vec();
                    let end = p.len_bytes().ok_or_else(short)?.to_vec();
                    let seq = p.varint().ok_or_else(short)?;
                    let t = RangeTomb { start, end, seq };
                    if tag == TAG_RANGE_DEL {
                        e.range_dels_added.push(t);
                    } else {
                        e.range_dels_removed.push(t);
                    }
                }
                TAG_PARTITION => {
                    let name = p.len_bytes().ok_or_else(short)?;
                    let name = String::from_utf8(name.to_vec()).map_err(|_| short())?;
                    let id = p.varint32().ok_or_else(short)?;
                    e.partitions_added.push((name, id));
                }
                TAG_PARTITION_DROPPED => e.partitions_dropped.push(p.varint32().ok_or_else(short)?),
                TAG_NEXT_PARTITION => e.next_partition = Some(p.varint32().ok_or_else(short)?),
                TAG_SPLIT_POINT => e.split_points.push(payload.to_vec()),
                TAG_MATRIX => e.l0_record = Some(payload.to_vec()),
                TAG_NEXT_LOG => e.next_log_number = Some(p.varint().ok_or_else(short)?),
                other => return Err(format!("unknown field tag {other} (written by a newer version?)")),
            }
        }
        Ok(e)
    }
}

/// A file's record: `place` (level or run id) then its metadata.
fn encode_file(place: u64, f: &FileMeta) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, place);
    put_varint(&mut b, f.number);
    put_varint(&mut b, f.size);
    put_bytes(&mut b, &f.smallest);
    put_bytes(&mut b, &f.largest);
    put_varint(&mut b, f.entries);
    put_varint(&mut b, f.deletions);
    put_varint(&mut b, f.smallest_seq);
    put_varint(&mut b, f.largest_seq);
    b
}

/// The metadata after a file record's `place`: `None` if truncated,
/// `Some(Err)` if its bounds are not internal keys.
fn decode_file(p: &mut Reader<'_>) -> Option<Result<FileMeta, String>> {
    let f = FileMeta {
        number: p.varint()?,
        size: p.varint()?,
        smallest: p.len_bytes()?.to_vec(),
        largest: p.len_bytes()?.to_vec(),
        entries: p.varint()?,
        deletions: p.varint()?,
        smallest_seq: p.varint()?,
        largest_seq: p.varint()?,
    };
    if f.smallest.len() < 8 || f.largest.len() < 8 {
        return Some(Err(format!("file {} has malformed bounds", f.number)));
    }
    Some(Ok(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, Kind};

    #[test]
    fn edit_round_trips() {
        let e = VersionEdit {
            log_number: Some(3),
            next_file_number: Some(9),
            last_sequence: Some(1000),
            pm_region_id: Some(0xdead_beef),
            next_log_number: Some(77),
            compact_pointers: vec![(1, b"k".to_vec())],
            deleted: vec![(0, 4), (1, 5)],
            added: vec![(
                1,
                FileMeta {
                    number: 8,
                    size: 1234,
                    smallest: internal_key(b"a", 1, Kind::Put),
                    largest: internal_key(b"z", 2, Kind::Delete),
                    entries: 10,
                    deletions: 1,
                    smallest_seq: 1,
                    largest_seq: 2,
                },
            )],
            l0_kind: Some(1),
            l0_record: Some(vec![1, 2, 3]),
            run_deleted: vec![(40, 6)],
            run_added: vec![(
                41,
                FileMeta {
                    number: 9,
                    size: 99,
                    smallest: internal_key(b"b", 3, Kind::Put),
                    largest: internal_key(b"c", 4, Kind::Put),
                    entries: 2,
                    deletions: 0,
                    smallest_seq: 3,
                    largest_seq: 4,
                },
            )],
            range_dels_added: vec![RangeTomb { start: b"a".to_vec(), end: b"c".to_vec(), seq: 7 }],
            range_dels_removed: vec![RangeTomb { start: Vec::new(), end: vec![0xff], seq: 3 }],
            partitions_added: vec![("users".into(), 1)],
            partitions_dropped: vec![1, 2],
            next_partition: Some(3),
            split_points: vec![b"m".to_vec(), Vec::new()],
        };
        assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
        assert!(VersionEdit::decode(&[99, 0]).is_err());
        assert!(VersionEdit::decode(&[7, 50, 1]).is_err());
    }
}
