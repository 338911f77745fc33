//! A full disk for real: the data directory on a size-limited tmpfs
//! (`mount -t tmpfs -o size=8m`), the PM region elsewhere. Writers get
//! back-pressure then `DiskFull` (no poison); after the file system is
//! grown (`mount -o remount,size=64m`) writes resume; a reopen has every
//! acknowledged write. Skipped with a message where mounting is not allowed.

use std::path::Path;
use std::process::Command;

use stratakv::{Db, Error, Options};

use crate::report::{Report, Value};

fn mount(args: &[&str]) -> Result<(), String> {
    let out = Command::new("mount").args(args).output().map_err(|e| format!("mount: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Unmounts on drop.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).output();
    }
}

/// The value stored under key `i` by these checks.
fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat(300)).into_bytes()
}

fn key(i: u32) -> String {
    format!("k{i:06}")
}

/// Writes keys 0, 1, ... until a write fails; returns how many were
/// acknowledged and the error (`Err` if none failed within `limit` writes).
fn fill_until_error(db: &Db, limit: u32, what: &str) -> Result<(u32, Error), String> {
    let mut acked = 0u32;
    loop {
        match db.put(key(acked), value(acked)) {
            Ok(()) => acked += 1,
            Err(e) => return Ok((acked, e)),
        }
        if acked > limit {
            return Err(format!("{what} never filled up"));
        }
    }
}

/// Reopens the database and checks that keys `0..total` hold their values.
fn check_after_reopen(dir: &Path, o: Options, total: u32, what: &str) -> Result<Db, String> {
    let db = Db::open(dir, o).map_err(|e| format!("reopen: {e}"))?;
    for i in 0..total {
        if db.get(key(i)).map_err(|e| e.to_string())? != Some(value(i)) {
            return Err(format!("{} lost after {what}", key(i)));
        }
    }
    Ok(db)
}

/// Runs the check; `Ok` with a skip note in the report if mounting fails.
pub fn disk_full(root: &Path, rep: &mut Report) -> Result<(), String> {
    let mnt = root.join("tmpfs");
    let pm = root.join("pm");
    std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    let target = mnt.to_string_lossy().into_owned();
    if let Err(e) = mount(&["-t", "tmpfs", "-o", "size=8m", "tmpfs", &target]) {
        rep.set("disk_full", Value::Text(format!("skipped: cannot mount a tmpfs here ({e})")));
        return Ok(());
    }
    let _guard = Mounted(&mnt);
    let dir = mnt.join("db");
    let mut o = Options::for_tests();
    o.pm_dir = Some(pm);
    o.pm_full_timeout_ms = 300;
    let db = Db::open(&dir, o.clone()).map_err(|e| format!("open: {e}"))?;
    let (acked, err) = fill_until_error(&db, 1_000_000, "the 8 MiB tmpfs")?;
    if !matches!(err, Error::DiskFull { .. }) {
        return Err(format!("a full disk gave {err}, not DiskFull"));
    }
    if let Some(p) = db.stats().poisoned {
        return Err(format!("a full disk poisoned the database: {p}"));
    }
    rep.add("disk_full_errors", 1);
    for i in (0..acked).step_by(97) {
        if db.get(key(i)).map_err(|e| format!("read on a full disk: {e}"))? != Some(value(i)) {
            return Err(format!("{} unreadable on a full disk", key(i)));
        }
    }
    mount(&["-o", "remount,size=64m", &target]).map_err(|e| format!("remount: {e}"))?;
    for i in acked..acked + 3000 {
        db.put(key(i), value(i)).map_err(|e| format!("write after the disk grew: {e}"))?;
    }
    let total = acked + 3000;
    db.flush().map_err(|e| format!("flush after the disk grew: {e}"))?;
    drop(db);
    let db = check_after_reopen(&dir, o, total, "a full disk")?;
    db.verify_checksums().map_err(|e| format!("check: {e}"))?;
    drop(db);
    rep.add("disk_full_writes_verified", total as u64);
    rep.set("disk_full", Value::Text("tmpfs 8m".into()));
    Ok(())
}

/// The PM region on a size-limited tmpfs that fills up (a sparse region
/// file, as on /dev/shm): a store into a page tmpfs cannot back used to be
/// a SIGBUS. Writers get `DiskFull` (the tmpfs is the "disk" of the
/// emulated PM); once the tmpfs grows, writes resume, and a reopen has
/// every acknowledged write.
pub fn pm_tmpfs_full(root: &Path, rep: &mut Report) -> Result<(), String> {
    let mnt = root.join("pmtmpfs");
    std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    let target = mnt.to_string_lossy().into_owned();
    if let Err(e) = mount(&["-t", "tmpfs", "-o", "size=3m", "tmpfs", &target]) {
        rep.set("pm_tmpfs_full", Value::Text(format!("skipped: cannot mount a tmpfs here ({e})")));
        return Ok(());
    }
    let _guard = Mounted(&mnt);
    let dir = root.join("db");
    let mut o = Options::for_tests();
    o.pm_dir = Some(mnt.clone());
    // The matrix alone may hold more PM than the tmpfs has.
    o.pm_size = 32 << 20;
    o.matrix_bytes = 8 << 20;
    o.pm_full_timeout_ms = 300;
    let db = Db::open(&dir, o.clone()).map_err(|e| format!("open: {e}"))?;
    let (acked, err) = fill_until_error(&db, 100_000, "the 3 MiB tmpfs under the PM region")?;
    if !err.is_full() {
        return Err(format!("a full tmpfs under the PM region gave {err}, not a full-device error"));
    }
    rep.add("pm_tmpfs_full_errors", 1);
    mount(&["-o", "remount,size=64m", &target]).map_err(|e| format!("remount: {e}"))?;
    // Background work that waited for room goes on; so do writers.
    for i in acked..acked + 2000 {
        db.put(key(i), value(i)).map_err(|e| format!("write after the tmpfs grew: {e}"))?;
    }
    let total = acked + 2000;
    drop(db);
    drop(check_after_reopen(&dir, o, total, "the PM tmpfs was full")?);
    rep.add("pm_tmpfs_full_writes_verified", total as u64);
    rep.set("pm_tmpfs_full", Value::Text("tmpfs 3m".into()));
    Ok(())
}

/// Writes `path` until its file system is full, then shrinks it to leave
/// `room` bytes free.
fn fill_with_ballast(path: &Path, room: u64) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| format!("ballast: {e}"))?;
    let chunk = vec![1u8; 1 << 20];
    let mut len = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => len += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => return Err(format!("ballast: {e}")),
        }
    }
    f.set_len(len.saturating_sub(room)).map_err(|e| format!("ballast: {e}"))?;
    f.sync_all().map_err(|e| format!("ballast: {e}"))
}

/// The PM region as an ordinary file on a small loopback ext4 (24 MiB)
/// that fills up: the region (256 MiB, sparse) is larger than the file
/// system, so its extents get blocks as they are allocated, and a store
/// into a hole of the full disk would be a SIGBUS that kills this process.
/// Writers get a full-device error instead; once a ballast file on the
/// file system is removed, writes resume, and a reopen has every
/// acknowledged write. Skipped with a message where loop mounts are not
/// allowed.
pub fn pm_ext4_full(root: &Path, rep: &mut Report) -> Result<(), String> {
    let image = root.join("ext4.img");
    let mnt = root.join("pmext4");
    std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    let f = std::fs::File::create(&image).map_err(|e| e.to_string())?;
    f.set_len(24 << 20).map_err(|e| e.to_string())?;
    drop(f);
    let mkfs = Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(&image).output();
    if !matches!(&mkfs, Ok(out) if out.status.success()) {
        rep.set("pm_ext4_full", Value::Text("skipped: no mkfs.ext4 here".into()));
        return Ok(());
    }
    let target = mnt.to_string_lossy().into_owned();
    if let Err(e) = mount(&["-o", "loop", &image.to_string_lossy(), &target]) {
        rep.set("pm_ext4_full", Value::Text(format!("skipped: cannot loop-mount an ext4 here ({e})")));
        return Ok(());
    }
    let _guard = Mounted(&mnt);
    // A ballast file takes all but 3 MiB of the file system: less than
    // the engine's PM needs for a log extent, a memtable's worth and the
    // matrix, so the region cannot settle into a steady state that fits.
    let ballast = mnt.join("ballast");
    fill_with_ballast(&ballast, 3 << 20)?;
    let dir = root.join("db");
    let mut o = Options::for_tests();
    o.pm_dir = Some(mnt.clone());
    o.pm_size = 256 << 20;
    o.matrix_bytes = 8 << 20;
    o.pm_full_timeout_ms = 300;
    let db = Db::open(&dir, o.clone()).map_err(|e| format!("open: {e}"))?;
    let (acked, err) = fill_until_error(&db, 200_000, "the 24 MiB ext4 under the PM region")?;
    if !err.is_full() {
        return Err(format!("a full ext4 under the PM region gave {err}, not a full-device error"));
    }
    let st = db.stats();
    if st.pm_allocated_bytes >= st.pm_region_bytes {
        return Err(format!(
            "the region file holds {} of {} bytes: it should have stayed sparse",
            st.pm_allocated_bytes, st.pm_region_bytes
        ));
    }
    rep.add("pm_ext4_full_errors", 1);
    std::fs::remove_file(&ballast).map_err(|e| format!("remove the ballast: {e}"))?;
    for i in acked..acked + 2000 {
        db.put(key(i), value(i)).map_err(|e| format!("write after room was made on the ext4: {e}"))?;
    }
    let total = acked + 2000;
    drop(db);
    drop(check_after_reopen(&dir, o, total, "the PM ext4 was full")?);
    rep.add("pm_ext4_full_writes_verified", total as u64);
    rep.set("pm_ext4_full", Value::Text("loopback ext4 24m".into()));
    Ok(())
}
