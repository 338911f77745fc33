//! The memtable: a DRAM skiplist from internal key to the PM offset of the
//! value. Values are never copied into DRAM; they stay in the log entry
//! they were written to (the index-unified log, DESIGN.md §2).

mod point_index;
mod skiplist;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_pmem::{Extent, Region};

use crate::batch::{key_offset, RecordLoc};
use crate::error::{Error, Result};
use crate::filter::BlockedBloom;
use crate::iterator::InternalIterator;
use crate::key::{make_internal_key, Kind, Lookup, ParsedKey, SeqNo, KIND_FOR_SEEK};
use point_index::{PointIndex, Probe};
use skiplist::SkipList;

/// Records in one batch from which [`Memtable::add_batch`] links them in
/// key order rather than batch order.
const SORT_BATCH: usize = 64;

/// A memtable over PM-resident log entries.
pub struct Memtable {
    list: SkipList,
    /// Bloom filter over user keys: a miss skips the skiplist search.
    filter: BlockedBloom,
    /// Key hash to the node of the key's newest version: a hit skips the skiplist search.
    index: PointIndex,
    region: Region,
    region_path: PathBuf,
    /// Leases on the log extents holding this memtable's entries; dropping
    /// the memtable releases them.
    extents: Mutex<Vec<Extent>>,
    bytes: AtomicUsize,
    /// PM log bytes of this memtable's entries.
    log_bytes: AtomicUsize,
    /// Records reserved into this memtable, counted when their space is
    /// reserved (before they are inserted).
    reserved_records: AtomicUsize,
    /// Highest sequence number reserved into this memtable.
    last_seq: AtomicU64,
    /// Log number of the first extent written for this memtable.
    first_log: u64,
    /// Set when sealed: the first log number of the next memtable, i.e. the
    /// MANIFEST's log number once this memtable is in tables.
    next_log: AtomicU64,
    /// Identifier for stats and debugging.
    id: u64,
}

impl std::fmt::Debug for Memtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memtable")
            .field("id", &self.id)
            .field("entries", &self.list.len())
            .field("bytes", &self.approximate_bytes())
            .field("first_log", &self.first_log)
            .finish()
    }
}

/// The DRAM of an empty memtable (skiplist arena, bloom filter, point
/// index), apart from its identity, so that it can be allocated and its
/// pages faulted in off the write path.
pub struct MemBuffers {
    list: SkipList,
    filter: BlockedBloom,
    index: PointIndex,
    capacity: usize,
}

impl MemBuffers {
    /// Buffers for a memtable of about `capacity` bytes of writes.
    pub fn new(capacity: usize) -> MemBuffers {
        MemBuffers {
            list: SkipList::new(capacity / 2),
            // Sized for entries of ~64 bytes; more, smaller entries only raise the false-positive rate.
            filter: BlockedBloom::with_capacity(capacity / 64, 10),
            // About two buckets per entry of ~64 bytes.
            index: PointIndex::new((capacity / 32).next_power_of_two()),
            capacity,
        }
    }

    /// The `capacity` these buffers were made for.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Writes one word in every page of the filter and the point index.
    /// They start as untouched zero pages, and each insert lands on a
    /// random one of them, so a fresh memtable would otherwise take a page
    /// fault on most of its first few thousand writes (a fault is usually
    /// a microsecond, but tens of microseconds when it queues behind
    /// another thread's mapping change, which made most of the put p99.9).
    pub fn prefault(&self) {
        self.filter.prefault();
        self.index.prefault();
    }
}

impl Memtable {
    /// An empty memtable whose entries start in log `first_log`, sized for
    /// about `capacity` bytes of writes.
    #[cfg(test)]
    pub fn new(id: u64, region: Region, region_path: PathBuf, first_log: u64, capacity: usize) -> Memtable {
        Memtable::with_buffers(id, region, region_path, first_log, MemBuffers::new(capacity))
    }

    /// An empty memtable over `buffers` (see [`MemBuffers`]).
    pub fn with_buffers(
        id: u64,
        region: Region,
        region_path: PathBuf,
        first_log: u64,
        buffers: MemBuffers,
    ) -> Memtable {
        let MemBuffers { list, filter, index, .. } = buffers;
        Memtable {
            list,
            filter,
            index,
            region,
            region_path,
            extents: Mutex::new(Vec::new()),
            bytes: AtomicUsize::new(0),
            log_bytes: AtomicUsize::new(0),
            reserved_records: AtomicUsize::new(0),
            last_seq: AtomicU64::new(0),
            first_log,
            next_log: AtomicU64::new(0),
            id,
        }
    }

    /// Identifier.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Log number of the first extent of this memtable.
    pub fn first_log(&self) -> u64 {
        self.first_log
    }

    /// Marks the memtable sealed; `next_log` is where the next one starts.
    pub fn seal(&self, next_log: u64) {
        self.next_log.store(next_log, Ordering::Release);
    }

    /// The next memtable's first log number (0 if not sealed).
    pub fn next_log(&self) -> u64 {
        self.next_log.load(Ordering::Acquire)
    }

    /// Keeps `extent` alive as long as this memtable.
    pub fn hold_extent(&self, extent: Extent) {
        self.extents.lock().push(extent);
    }

    /// Extents this memtable holds.
    pub fn extents(&self) -> Vec<Extent> {
        self.extents.lock().clone()
    }

    /// Notes that sequence numbers up to `seq` were reserved into this memtable.
    pub fn note_seq(&self, seq: SeqNo) {
        self.last_seq.fetch_max(seq, Ordering::AcqRel);
    }

    /// Highest sequence number reserved into this memtable (0 if none).
    pub fn last_seq(&self) -> SeqNo {
        self.last_seq.load(Ordering::Acquire)
    }

    /// Bytes of DRAM index plus PM entries attributed to this memtable.
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Adds the PM bytes of an entry to the size estimate.
    pub fn charge(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.log_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Notes that `n` more records were reserved into this memtable.
    pub fn charge_records(&self, n: usize) {
        self.reserved_records.fetch_add(n, Ordering::Relaxed);
    }

    /// Records in this memtable, counting those reserved but not yet
    /// inserted (what a flush will have to index).
    pub fn records(&self) -> u64 {
        self.reserved_records.load(Ordering::Relaxed).max(self.list.len()) as u64
    }

    /// PM log bytes of this memtable's entries.
    pub fn log_bytes(&self) -> u64 {
        self.log_bytes.load(Ordering::Relaxed) as u64
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.list.len() == 0
    }

    /// Indexes one record whose value sits at `value_off` in PM.
    pub fn add(
        &self,
        seq: SeqNo,
        kind: Kind,
        key: &[u8],
        value_off: u64,
        value_len: u32,
        node_back: u32,
    ) -> Result<()> {
        let len_word = len_word(value_len, node_back);
        let mut buf = [0u8; 64];
        let n = key.len() + 8;
        let node = if let Some(b) = buf.get_mut(..n) {
            b[..key.len()].copy_from_slice(key);
            b[key.len()..].copy_from_slice(&crate::key::trailer(seq, kind).to_le_bytes());
            self.list.insert(b, value_off, len_word)
        } else {
            let mut ik = Vec::with_capacity(n);
            make_internal_key(&mut ik, key, seq, kind);
            self.list.insert(&ik, value_off, len_word)
        };
        let node = node.ok_or_else(|| self.full())?;
        self.note_linked(seq, key, node);
        Ok(())
    }

    /// The error for a skiplist arena with no room left.
    fn full(&self) -> Error {
        Error::Pm(format!("memtable {} index is full ({} entries)", self.id, self.list.len()))
    }

    /// Book-keeping for node `node`, just linked, holding version `seq` of
    /// `key`: the filter, the byte count and the point index. Readers see
    /// the record only once its sequence is published, after all of this.
    fn note_linked(&self, seq: SeqNo, key: &[u8], node: u32) {
        let hash = crate::key::key_hash(key);
        self.filter.insert(hash);
        self.bytes.fetch_add(key.len() + 8 + 96, Ordering::Relaxed);
        self.index.record(hash, node, |old| {
            self.list
                .with_node(old, |k, _, _| ParsedKey::parse(k).and_then(|p| (p.user_key == key).then_some(p.seq < seq)))
                .flatten()
        });
    }

    /// Indexes the records of one batch, the first at sequence `first_seq`
    /// and the rest after it in order; each is (kind, key, value offset in
    /// PM, value length, distance back from the value to the record's PM
    /// skiplist node or 0). Same result as [`Memtable::add`] for each, but
    /// the skiplist searches of the whole batch run side by side (see
    /// `SkipList::insert_batch`).
    pub fn add_batch(&self, first_seq: SeqNo, records: &[(Kind, &[u8], u64, u32, u32)]) -> Result<()> {
        if let [(kind, key, off, len, back)] = records {
            return self.add(first_seq, *kind, key, *off, *len, *back);
        }
        let mut keys = Vec::with_capacity(records.iter().map(|r| r.1.len() + 8).sum());
        for (i, (kind, key, ..)) in records.iter().enumerate() {
            keys.extend_from_slice(key);
            keys.extend_from_slice(&crate::key::trailer(first_seq + i as u64, *kind).to_le_bytes());
        }
        let mut items = Vec::with_capacity(records.len());
        let mut at = 0;
        for (_, key, off, len, back) in records {
            let end = at + key.len() + 8;
            items.push((keys.get(at..end).unwrap_or_default(), *off, len_word(*len, *back)));
            at = end;
        }
        // A big batch of unrelated keys (a server pass of many clients'
        // writes) goes in in key order: neighbouring searches then share
        // the nodes they pass, which are in cache.
        let reorder = items.len() >= SORT_BATCH
            && !items.windows(2).all(|w| crate::key::compare_internal(w[0].0, w[1].0).is_lt());
        let nodes = if reorder {
            let mut order: Vec<usize> = (0..items.len()).collect();
            order.sort_unstable_by(|&a, &b| match (items.get(a), items.get(b)) {
                (Some(x), Some(y)) => crate::key::compare_internal(x.0, y.0),
                _ => std::cmp::Ordering::Equal,
            });
            let in_order: Vec<(&[u8], u64, u64)> = order.iter().filter_map(|&i| items.get(i).copied()).collect();
            let placed = self.list.insert_batch(&in_order).ok_or_else(|| self.full())?;
            let mut nodes = vec![0u32; items.len()];
            for (&i, n) in order.iter().zip(placed) {
                if let Some(slot) = nodes.get_mut(i) {
                    *slot = n;
                }
            }
            nodes
        } else {
            self.list.insert_batch(&items).ok_or_else(|| self.full())?
        };
        for (i, ((_, key, ..), node)) in records.iter().zip(nodes).enumerate() {
            self.note_linked(first_seq + i as u64, key, node);
        }
        Ok(())
    }

    /// Asks for the cache lines a lookup of a key with hash `hash` reads
    /// first (filter block, index bucket).
    pub fn prefetch(&self, hash: u64) {
        self.filter.prefetch(hash);
        self.index.prefetch(hash);
    }

    /// The newest version of `key` (whose hash is `hash`) with sequence <= `seq`.
    pub fn get(&self, key: &[u8], hash: u64, seq: SeqNo) -> Result<Lookup> {
        if !self.filter.may_contain(hash) {
            return Ok(Lookup::Missing);
        }
        match self.index.probe(hash) {
            Probe::Empty => return Ok(Lookup::Missing),
            Probe::Node(n) => {
                let hit = self.list.with_node(n, |k, off, len| match ParsedKey::parse(k) {
                    Some(p) if p.user_key != key => Some(Ok(Lookup::Missing)),
                    Some(p) if p.seq <= seq => Some(self.answer(p.kind, off, len)),
                    // Too new for this reader: an older version may be visible.
                    _ => None,
                });
                if let Some(Some(found)) = hit {
                    return found;
                }
            }
            Probe::Collided => {}
        }
        let mut probe = Vec::with_capacity(key.len() + 8);
        make_internal_key(&mut probe, key, seq, KIND_FOR_SEEK);
        let x = self.list.seek(&probe);
        let found = self.list.with_node(x, |k, off, len| match ParsedKey::parse(k) {
            None => Err(Error::corruption(&self.region_path, off, "bad key in memtable")),
            Some(p) if p.user_key != key => Ok(Lookup::Missing),
            Some(p) => self.answer(p.kind, off, len),
        });
        found.unwrap_or(Ok(Lookup::Missing))
    }

    fn answer(&self, kind: Kind, value_off: u64, value_len: u32) -> Result<Lookup> {
        match kind {
            Kind::Delete => Ok(Lookup::Deleted),
            Kind::Put => Ok(Lookup::Found(self.value_at(value_off, value_len)?.to_vec())),
        }
    }

    fn value_at(&self, off: u64, len: u32) -> Result<&[u8]> {
        self.region.read(off, len as u64).map_err(|e| Error::from_pm(&self.region_path, e))
    }

    /// An iterator over every entry, in internal-key order.
    pub fn iter(self: &Arc<Self>) -> MemIter {
        MemIter { mem: self.clone(), cur: 0, key: Vec::new(), value: (0, 0) }
    }
}

/// The skiplist's value-length word: the length, and the distance back
/// from the value to the record's PM skiplist node (pm-only; 0: none).
fn len_word(value_len: u32, node_back: u32) -> u64 {
    value_len as u64 | (node_back as u64) << 32
}

/// A cursor over a memtable (holds it alive).
pub struct MemIter {
    mem: Arc<Memtable>,
    cur: u32,
    key: Vec<u8>,
    value: (u64, u32),
}

impl MemIter {
    fn land(&mut self, x: u32) -> Result<()> {
        self.cur = x;
        let key = &mut self.key;
        let value = self.mem.list.with_node(x, |k, off, len| {
            key.clear();
            key.extend_from_slice(k);
            (off, len)
        });
        if let Some((off, len)) = value {
            // Check once here so that value() can hand out the slice.
            self.mem.value_at(off, len)?;
            self.value = (off, len);
        }
        Ok(())
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        SkipList::is_node(self.cur)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let x = self.mem.list.first();
        self.land(x)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let x = self.mem.list.last();
        self.land(x)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let x = self.mem.list.seek(target);
        self.land(x)
    }

    fn next(&mut self) -> Result<()> {
        let x = self.mem.list.next_of(self.cur);
        self.land(x)
    }

    fn prev(&mut self) -> Result<()> {
        let x = self.mem.list.prev_of(self.cur);
        self.land(x)
    }

    fn log_record(&self) -> Result<Option<RecordLoc>> {
        if !self.valid() {
            return Ok(None);
        }
        let p = ParsedKey::parse(&self.key)
            .ok_or_else(|| Error::corruption(&self.mem.region_path, self.value.0, "malformed key in memtable"))?;
        let key_len = p.user_key.len() as u32;
        let (value_off, value_len) = self.value;
        Ok(Some(RecordLoc {
            key_off: key_offset(p.kind, value_off, value_len, key_len),
            key_len,
            value_len: if p.kind == Kind::Put { value_len } else { 0 },
            hash: None,
            node_off: match self.mem.list.node_back(self.cur) {
                0 => None,
                back => Some(value_off - back as u64),
            },
        }))
    }

    fn key(&self) -> &[u8] {
        if self.valid() {
            &self.key
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if !self.valid() {
            return &[];
        }
        // land() verified the range, so this read cannot fail.
        self.mem.value_at(self.value.0, self.value.1).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests;
