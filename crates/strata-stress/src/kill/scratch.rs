//! The kill mode's partition cycle: one child thread creates partition
//! `scratch-N`, fills it, deletes half of it with one `delete_range`,
//! drops it, and starts over with N + 1, noting each step in a phase file
//! before (pending) and after (done) the call. After the SIGKILL the
//! parent checks that what the database holds is what the phase allows:
//! a step done is there, a step pending is all there or not at all (one
//! range tombstone, one MANIFEST edit), and no dropped partition returns.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use stratakv::{Db, WriteBatch};

/// Keys of each scratch partition.
pub const SCRATCH_KEYS: u64 = 200;

/// Where the cycle stands (the phase file's second word).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u64)]
enum Phase {
    /// Nothing yet (a new file).
    Idle = 0,
    /// `create_partition` and the writes are under way.
    Creating = 1,
    /// Created and every key written (acknowledged).
    Written = 2,
    /// `delete_range` of the first half called.
    RangePending = 3,
    /// `delete_range` returned.
    RangeDone = 4,
    /// `drop_partition` called.
    DropPending = 5,
    /// `drop_partition` returned.
    Dropped = 6,
}

impl Phase {
    fn of(v: u64) -> Phase {
        match v {
            1 => Phase::Creating,
            2 => Phase::Written,
            3 => Phase::RangePending,
            4 => Phase::RangeDone,
            5 => Phase::DropPending,
            6 => Phase::Dropped,
            _ => Phase::Idle,
        }
    }
}

/// The phase file next to the expected-state file: `n u64, phase u64`.
pub fn phase_path(state: &Path) -> PathBuf {
    state.with_extension("scratch")
}

struct PhaseFile(File);

impl PhaseFile {
    fn open(path: &Path) -> anyhow::Result<PhaseFile> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        if f.metadata()?.len() < 16 {
            f.write_all_at(&[0u8; 16], 0)?;
        }
        Ok(PhaseFile(f))
    }

    fn get(&self) -> anyhow::Result<(u64, Phase)> {
        let mut b = [0u8; 16];
        self.0.read_exact_at(&mut b, 0)?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(w)
        };
        Ok((word(0), Phase::of(word(1))))
    }

    /// One 16-byte positional write: a process kill leaves it whole.
    fn set(&self, n: u64, p: Phase) -> anyhow::Result<()> {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&n.to_le_bytes());
        b[8..].copy_from_slice(&(p as u64).to_le_bytes());
        self.0.write_all_at(&b, 0)?;
        Ok(())
    }
}

fn name_of(n: u64) -> String {
    format!("scratch-{n}")
}

fn key(i: u64) -> Vec<u8> {
    format!("s{i:04}").into_bytes()
}

fn value(n: u64, i: u64) -> Vec<u8> {
    format!("scratch-{n}-{i}").into_bytes()
}

/// The child's cycle; returns only on an error.
pub fn run(db: Db, state: &Path) -> anyhow::Result<()> {
    let file = PhaseFile::open(&phase_path(state))?;
    let (mut n, _) = file.get()?;
    loop {
        n += 1;
        let name = name_of(n);
        file.set(n, Phase::Creating)?;
        let p = db.create_partition(&name).context("create_partition")?;
        for chunk in (0..SCRATCH_KEYS).collect::<Vec<_>>().chunks(50) {
            let mut b = WriteBatch::new();
            for i in chunk {
                b.put(key(*i), value(n, *i));
            }
            p.write(b).context("scratch write")?;
        }
        file.set(n, Phase::Written)?;
        file.set(n, Phase::RangePending)?;
        p.delete_range(key(0), key(SCRATCH_KEYS / 2)).context("delete_range")?;
        file.set(n, Phase::RangeDone)?;
        file.set(n, Phase::DropPending)?;
        db.drop_partition(&name).context("drop_partition")?;
        file.set(n, Phase::Dropped)?;
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
}

/// Checks the recovered `db` against the phase file, then drops the
/// scratch partition left behind (if any) and notes it dropped.
pub fn check_and_resolve(db: &Db, state: &Path) -> anyhow::Result<Result<(), String>> {
    let file = PhaseFile::open(&phase_path(state))?;
    let (n, phase) = file.get()?;
    let current = name_of(n);
    let partitions = db.list_partitions();
    for p in &partitions {
        if p.starts_with("scratch-") && *p != current {
            return Ok(Err(format!("partition {p} is back (the cycle is at {current}, {phase:?})")));
        }
    }
    let exists = partitions.contains(&current);
    let must_exist = matches!(phase, Phase::Written | Phase::RangePending | Phase::RangeDone);
    if n > 0 && must_exist && !exists {
        return Ok(Err(format!("{current} is gone at {phase:?}")));
    }
    if phase == Phase::Dropped && exists {
        return Ok(Err(format!("{current} survived its acknowledged drop")));
    }
    if exists {
        let p = db.partition(&current).context("opening the scratch partition")?;
        let got: Vec<(Vec<u8>, Vec<u8>)> = p.iter(..)?.collect();
        let present = |i: u64| got.iter().any(|(k, v)| *k == key(i) && *v == value(n, i));
        if got.iter().any(|(k, v)| !(0..SCRATCH_KEYS).any(|i| *k == key(i) && *v == value(n, i))) {
            return Ok(Err(format!("{current} holds a key or value no write stored")));
        }
        let first: Vec<bool> = (0..SCRATCH_KEYS / 2).map(present).collect();
        let second_all = (SCRATCH_KEYS / 2..SCRATCH_KEYS).all(present);
        let first_all = first.iter().all(|b| *b);
        let first_none = first.iter().all(|b| !*b);
        let ok = match phase {
            Phase::Idle | Phase::Creating => true,
            Phase::Written => first_all && second_all,
            Phase::RangePending => (first_all || first_none) && second_all,
            Phase::RangeDone | Phase::DropPending => first_none && second_all,
            Phase::Dropped => false,
        };
        if !ok {
            let have = first.iter().filter(|b| **b).count();
            return Ok(Err(format!(
                "{current} at {phase:?}: {have} of {} first-half keys, second half complete: {second_all}",
                SCRATCH_KEYS / 2
            )));
        }
        db.drop_partition(&current).context("dropping the leftover scratch partition")?;
    }
    if n > 0 {
        file.set(n, Phase::Dropped)?;
    }
    Ok(Ok(()))
}
