//! Engine limits: keys and values at and over the limits (64 KiB keys,
//! 256 MiB values), and a full PM region.

use std::path::Path;

use stratakv::{Db, Error, L0Kind, Options, WriteBatch};
use stratakv::{MAX_KEY_LEN, MAX_VALUE_LEN};

use crate::report::Report;

fn invalid(r: Result<(), Error>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

/// Keys of exactly the limit work (put, get, delete, batch, iterate,
/// reopen, flush, compaction); one byte more is `InvalidArgument` for every
/// call; a value of exactly 256 MiB is stored and read back after a reopen
/// and a compaction, one byte more is refused.
pub fn key_value_limits(dir: &Path, huge_values: bool, rep: &mut Report) -> Result<(), String> {
    let o = Options {
        pm_size: if huge_values { 2 << 30 } else { 256 << 20 },
        write_buffer_size: 8 << 20,
        ..Options::default()
    };
    let db = Db::open(dir, o.clone()).map_err(|e| format!("open: {e}"))?;
    let max_key = vec![b'k'; MAX_KEY_LEN];
    let over_key = vec![b'k'; MAX_KEY_LEN + 1];
    db.put(&max_key, b"at the limit").map_err(|e| format!("a key of exactly {MAX_KEY_LEN} bytes was refused: {e}"))?;
    if !invalid(db.put(&over_key, b"x")) || !invalid(db.delete(&over_key)) {
        return Err("a key over the limit was not refused with InvalidArgument".into());
    }
    if !matches!(db.get(&over_key), Err(Error::InvalidArgument(_))) {
        return Err("get of a key over the limit was not InvalidArgument".into());
    }
    let mut b = WriteBatch::new();
    b.put(b"a", b"1").put(&over_key, b"2");
    if !invalid(db.write(b)) {
        return Err("a batch holding a key over the limit was not refused".into());
    }
    if db.get(b"a").map_err(|e| e.to_string())?.is_some() {
        return Err("part of a refused batch was applied".into());
    }
    rep.add("over_limit_keys_refused", 4);
    // The empty key: stored and read back, or refused clearly.
    match db.put(b"", b"empty key") {
        Ok(()) => {
            if db.get(b"").map_err(|e| e.to_string())?.as_deref() != Some(&b"empty key"[..]) {
                return Err("the empty key was accepted but not read back".into());
            }
        }
        Err(Error::InvalidArgument(_)) => {}
        Err(e) => return Err(format!("the empty key failed with {e}")),
    }
    let mut value_at_limit = false;
    if huge_values {
        let big: Vec<u8> = (0..MAX_VALUE_LEN).map(|i| (i % 251) as u8).collect();
        db.put(b"big", &big).map_err(|e| format!("a value of exactly {MAX_VALUE_LEN} bytes was refused: {e}"))?;
        let mut over = big.clone();
        over.push(0);
        if !invalid(db.put(b"big2", &over)) {
            return Err("a value over the limit was not refused with InvalidArgument".into());
        }
        drop(over);
        rep.add("over_limit_values_refused", 1);
        if db.get(b"big").map_err(|e| e.to_string())?.as_deref() != Some(&big[..]) {
            return Err("the 256 MiB value did not read back".into());
        }
        value_at_limit = true;
    }
    db.compact_range(..).map_err(|e| format!("compact_range: {e}"))?;
    db.close().map_err(|e| format!("close: {e}"))?;
    let db = Db::open(dir, o).map_err(|e| format!("reopen: {e}"))?;
    if db.get(&max_key).map_err(|e| e.to_string())?.as_deref() != Some(&b"at the limit"[..]) {
        return Err("the key at the limit was lost across reopen and compaction".into());
    }
    if value_at_limit {
        let got = db.get(b"big").map_err(|e| e.to_string())?;
        let ok =
            got.as_ref().map(|v| v.len() == MAX_VALUE_LEN && v.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
        if ok != Some(true) {
            return Err("the 256 MiB value was lost or damaged across reopen and compaction".into());
        }
        rep.add("max_values_stored", 1);
    }
    let n = crate::read_all(&db).map_err(|e| e.to_string())?.len();
    rep.add("max_keys_stored", 1);
    rep.add("keys_after_reopen", n as u64);
    db.verify_checksums().map_err(|e| format!("check: {e}"))?;
    Ok(())
}

/// Fills the PM region while open iterators pin every memtable: writers
/// get back-pressure, then `PmFull`; after the pins go, writes resume; a
/// reopen has every acknowledged write.
pub fn pm_full(dir: &Path, l0: L0Kind, rep: &mut Report) -> Result<(), String> {
    let mut o = Options::for_tests();
    o.l0 = l0;
    o.pm_size = 2 << 20;
    o.matrix_bytes = 1 << 20;
    o.write_buffer_size = 256 << 10;
    o.pm_full_timeout_ms = 300;
    let db = Db::open(dir, o.clone()).map_err(|e| format!("open: {e}"))?;
    let value = |i: u32| format!("value-{i}-{}", "v".repeat(200)).into_bytes();
    let mut acked = 0u32;
    let mut pins = Vec::new();
    let err = loop {
        if acked.is_multiple_of(500) {
            let mut it = db.iter(..).map_err(|e| e.to_string())?;
            it.next();
            pins.push(it);
        }
        match db.put(format!("k{acked:06}"), value(acked)) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        if acked > 200_000 {
            return Err("the PM region never filled up".into());
        }
    };
    if !matches!(err, Error::PmFull(_)) {
        return Err(format!("a full PM region gave {err}, not PmFull"));
    }
    rep.add("pm_full_errors", 1);
    drop(pins);
    // pm-only keeps every live key in PM: with only new keys written the
    // region is full for good, and says so again; the other profiles free
    // PM once their memtables can flush.
    let more = if l0 == L0Kind::PmOnly {
        match db.put("one-more", value(0)) {
            Err(Error::PmFull(_)) => 0,
            other => return Err(format!("a write to a full pm-only region gave {other:?}, not PmFull")),
        }
    } else {
        2000
    };
    for i in acked..acked + more {
        db.put(format!("k{i:06}"), value(i)).map_err(|e| format!("write after PM was freed: {e}"))?;
    }
    let total = acked + more;
    drop(db);
    let db = Db::open(dir, o).map_err(|e| format!("reopen: {e}"))?;
    for i in 0..total {
        if db.get(format!("k{i:06}")).map_err(|e| e.to_string())? != Some(value(i)) {
            return Err(format!("k{i:06} lost after a full PM region"));
        }
    }
    rep.add("pm_full_writes_verified", total as u64);
    Ok(())
}
