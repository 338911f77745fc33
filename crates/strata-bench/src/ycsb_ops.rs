//! Running YCSB: the load phase (`ycsbload`) and the transaction phase of
//! a core workload (`ycsba`..`ycsbf`), one function per thread.
//!
//! As in the rest of strata-bench, each thread does the full operation
//! count (`--reads`), not a share of it as YCSB's `operationcount` would.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;

use crate::keygen::ValueGen;
use crate::workloads::{Ctx, Worker};
use crate::ycsb::{
    decode_record, encode_record, key_name, update_record, Distribution, ScrambledZipfian, SkewedLatest, Workload,
    YcsbOp,
};

/// State shared by the YCSB benchmarks of one process: how many records exist.
pub struct YcsbShared {
    /// Records loaded by the load phase (YCSB `recordcount`).
    pub record_count: u64,
    /// The next key number an insert takes.
    next_insert: AtomicU64,
    /// One past the highest key number whose insert has finished.
    acknowledged: AtomicU64,
}

impl YcsbShared {
    /// For a database holding records 0..record_count.
    pub fn new(record_count: u64) -> YcsbShared {
        YcsbShared {
            record_count,
            next_insert: AtomicU64::new(record_count),
            acknowledged: AtomicU64::new(record_count),
        }
    }

    /// Records that can be read now (key numbers 0..this).
    pub fn readable(&self) -> u64 {
        self.acknowledged.load(Ordering::Acquire)
    }
}

/// Record layout: fields per record and bytes per field.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// YCSB `fieldcount`.
    pub fields: usize,
    /// YCSB `fieldlength`.
    pub field_len: usize,
}

/// Inserts records `range` in key-number order (YCSB's load phase).
pub fn load(ctx: &Ctx<'_>, w: &mut Worker, layout: Layout, range: std::ops::Range<u64>) -> Result<()> {
    let mut values = ValueGen::new(layout.field_len, ctx.compression_ratio);
    let mut fill = |len: usize| values.generate(len).to_vec();
    let (mut key, mut rec) = (Vec::new(), Vec::new());
    w.rec.start();
    for i in range {
        key_name(i, &mut key);
        encode_record(layout.fields, layout.field_len, &mut fill, &mut rec);
        ctx.engine.put(&key, &rec, ctx.sync)?;
        w.rec.bytes += (key.len() + rec.len()) as u64;
        w.rec.finished(1);
    }
    w.rec.stop();
    Ok(())
}

/// How a thread picks the record of a read, update, scan or read-modify-write.
enum Chooser {
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
}

/// Runs the transaction phase of `wl` on this thread.
pub fn run(
    ctx: &Ctx<'_>,
    w: &mut Worker,
    wl: &Workload,
    shared: &YcsbShared,
    layout: Layout,
    threads: usize,
) -> Result<()> {
    // YCSB sizes the Zipfian key space for the inserts it expects.
    let expected_new = (ctx.budget.ops as f64 * threads as f64 * wl.insert_proportion() * 2.0) as u64;
    let mut chooser = match wl.distribution {
        Distribution::Zipfian => {
            Chooser::Zipfian(ScrambledZipfian::new(0, (shared.record_count + expected_new).saturating_sub(1)))
        }
        Distribution::Latest => Chooser::Latest(SkewedLatest::new(shared.readable().saturating_sub(1))),
    };
    let mut values = ValueGen::new(layout.field_len, ctx.compression_ratio);
    let (mut key, mut rec) = (Vec::new(), Vec::new());
    w.rec.start();
    let start = w.rec.started();
    // With --batch_size > 1, consecutive reads are gathered into one
    // multi_get (p2KVS's opportunistic batching, from one client thread);
    // any other operation first sends the reads gathered so far.
    let mut reads: Vec<Vec<u8>> = Vec::new();
    while !ctx.budget.done(w.rec.ops + reads.len() as u64, start) {
        let op = wl.choose(w.rng.next_f64());
        if op != YcsbOp::Read && !reads.is_empty() {
            read_batch(ctx, w, &mut reads)?;
        }
        if op == YcsbOp::Insert {
            let k = shared.next_insert.fetch_add(1, Ordering::AcqRel);
            key_name(k, &mut key);
            let mut fill = |len: usize| values.generate(len).to_vec();
            encode_record(layout.fields, layout.field_len, &mut fill, &mut rec);
            ctx.engine.put(&key, &rec, ctx.sync)?;
            shared.acknowledged.fetch_max(k + 1, Ordering::AcqRel);
            w.rec.bytes += (key.len() + rec.len()) as u64;
            w.rec.count("insert", 1);
            w.rec.finished(1);
            continue;
        }
        let readable = shared.readable().max(1);
        let keynum = match &mut chooser {
            Chooser::Zipfian(z) => loop {
                let k = z.next(&mut w.rng);
                if k < readable {
                    break k;
                }
            },
            Chooser::Latest(l) => l.next(readable - 1, &mut w.rng),
        };
        key_name(keynum, &mut key);
        match op {
            YcsbOp::Read if ctx.batch_size > 1 => {
                reads.push(key.clone());
                if reads.len() >= ctx.batch_size {
                    read_batch(ctx, w, &mut reads)?;
                }
                continue;
            }
            YcsbOp::Read => {
                read(ctx, w, &key)?;
                w.rec.count("read", 1);
            }
            YcsbOp::Update => {
                update(ctx, w, &key, layout, &mut values)?;
                w.rec.count("update", 1);
            }
            YcsbOp::ReadModifyWrite => {
                read(ctx, w, &key)?;
                update(ctx, w, &key, layout, &mut values)?;
                w.rec.count("readmodifywrite", 1);
            }
            YcsbOp::Scan => {
                let len = 1 + w.rng.below(wl.max_scan_length);
                let mut seen = 0u64;
                let mut bytes = 0u64;
                ctx.engine.scan(Some(&key), false, &mut |k, v| {
                    // The binding deserializes every record it returns.
                    bytes += (k.len() + v.len()) as u64;
                    let _ = decode_record(v).map(|f| f.len());
                    seen += 1;
                    seen < len
                })?;
                if seen > 0 {
                    w.rec.found += 1;
                }
                w.rec.bytes += bytes;
                w.rec.count("scan", 1);
            }
            YcsbOp::Insert => {}
        }
        w.rec.finished(1);
    }
    if !reads.is_empty() {
        read_batch(ctx, w, &mut reads)?;
    }
    w.rec.stop();
    Ok(())
}

/// Reads and deserializes the records of `keys` with one multi_get, and empties it.
fn read_batch(ctx: &Ctx<'_>, w: &mut Worker, keys: &mut Vec<Vec<u8>>) -> Result<()> {
    let (mut found, mut bytes) = (0u64, 0u64);
    ctx.engine.multi_get_visit(keys, &mut |i, v| {
        if let Some(v) = v {
            if decode_record(v).is_some() {
                found += 1;
            }
            bytes += (keys.get(i).map_or(0, |k| k.len()) + v.len()) as u64;
        }
    })?;
    let n = keys.len() as u64;
    w.rec.found += found;
    w.rec.bytes += bytes;
    w.rec.count("read", n);
    w.rec.finished(n);
    keys.clear();
    Ok(())
}

/// Reads and deserializes a whole record.
fn read(ctx: &Ctx<'_>, w: &mut Worker, key: &[u8]) -> Result<()> {
    let (mut ok, mut len) = (false, 0);
    if ctx.engine.get_visit(key, &mut |v| {
        ok = decode_record(v).is_some();
        len = v.len();
    })? {
        if ok {
            w.rec.found += 1;
        }
        w.rec.bytes += (key.len() + len) as u64;
    }
    Ok(())
}

/// YCSB's RocksDB binding `update`: read the record, replace one field, write it back.
fn update(ctx: &Ctx<'_>, w: &mut Worker, key: &[u8], layout: Layout, values: &mut ValueGen) -> Result<()> {
    let field = w.rng.below(layout.fields as u64) as usize;
    let old = ctx.engine.get(key)?.unwrap_or_default();
    let value = values.generate(layout.field_len);
    let new = match update_record(&old, field, value) {
        Some(r) => r,
        // A malformed record (not written by YCSB) is replaced by the new field alone.
        None => update_record(&[], field, value).unwrap_or_default(),
    };
    ctx.engine.put(key, &new, ctx.sync)?;
    w.rec.bytes += (key.len() + new.len()) as u64;
    Ok(())
}
