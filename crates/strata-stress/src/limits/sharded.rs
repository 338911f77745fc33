//! Limits through the sharded front end (`--shards N`): keys over the limit
//! and keys in the front end's reserved range are refused with
//! `InvalidArgument`, and a full PM region in a shard is a clear `PmFull`
//! error for the writes that reach it, after which (pins released) writing
//! resumes and every acknowledged write is there after a reopen.

use std::path::Path;

use stratakv::{Error, L0Kind, Options, Sharded, ShardedOptions, WriteBatch, MAX_KEY_LEN};

use crate::report::Report;

fn options(shards: usize, l0: L0Kind) -> ShardedOptions {
    let mut o = Options::for_tests();
    o.l0 = l0;
    // Each shard gets pm_size / N, at least 16 MiB (the front end's floor).
    o.pm_size = (16 << 20) * shards as u64;
    o.matrix_bytes = (8 << 20) * shards as u64;
    o.write_buffer_size = (2 << 20) * shards;
    o.pm_full_timeout_ms = 300;
    ShardedOptions::new(shards, o)
}

/// Over-limit and reserved keys are refused; a full shard's PM is `PmFull`,
/// then writes resume and survive a reopen.
pub fn sharded_limits(dir: &Path, shards: usize, l0: L0Kind, rep: &mut Report) -> Result<(), String> {
    let opts = options(shards, l0);
    let db = Sharded::open(dir, opts.clone()).map_err(|e| format!("open {shards} shards: {e}"))?;
    let long = vec![b'k'; MAX_KEY_LEN + 1];
    for (what, r) in [
        ("put of an over-limit key", db.put(&long, b"v")),
        ("put of a reserved key", db.put([0xff; 8], b"v")),
        ("batch with an over-limit key", {
            let mut b = WriteBatch::new();
            b.put(b"ok", b"v").put(&long, b"v");
            db.write(b)
        }),
    ] {
        if !matches!(r, Err(Error::InvalidArgument(_))) {
            return Err(format!("{what} through {shards} shards gave {r:?}, not InvalidArgument"));
        }
    }
    if db.get(b"ok").map_err(|e| e.to_string())?.is_some() {
        return Err("a refused batch was partly applied".into());
    }
    rep.add("sharded_refusals", 3);
    let value = |i: u32| format!("value-{i}-{}", "v".repeat(400)).into_bytes();
    let mut acked = 0u32;
    let mut pins = Vec::new();
    let err = loop {
        if acked.is_multiple_of(2000) {
            // Open iterators pin memtables and PM, so the regions really fill.
            let mut it = db.iter(..).map_err(|e| e.to_string())?;
            it.next();
            pins.push(it);
        }
        match db.put(format!("k{acked:07}"), value(acked)) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        if acked > 1_000_000 {
            return Err(format!("{shards} shards' PM regions never filled up"));
        }
    };
    if !matches!(err, Error::PmFull(_)) {
        return Err(format!("a full shard PM region gave {err}, not PmFull"));
    }
    rep.add("sharded_pm_full_errors", 1);
    drop(pins);
    let more = if l0 == L0Kind::PmOnly { 0 } else { 2000 };
    for i in acked..acked + more {
        db.put(format!("k{i:07}"), value(i)).map_err(|e| format!("write after PM was freed ({shards} shards): {e}"))?;
    }
    let total = acked + more;
    db.close().map_err(|e| format!("close: {e}"))?;
    let db = Sharded::open(dir, opts).map_err(|e| format!("reopen: {e}"))?;
    for i in 0..total {
        if db.get(format!("k{i:07}")).map_err(|e| e.to_string())? != Some(value(i)) {
            return Err(format!("k{i:07} lost after a full PM region ({shards} shards)"));
        }
    }
    rep.add("sharded_pm_full_writes_verified", u64::from(total));
    Ok(())
}
