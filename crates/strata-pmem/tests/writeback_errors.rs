//! A real write-back error on an ordinary-file region: ext4 on a loop
//! device whose backing file lives on a full tmpfs, so the device fails
//! every data write. Linux reports such an error once per open file; the
//! region must keep reporting it (see `syncview.rs`), or a later msync
//! would call pages durable that the device never got.
//!
//! Needs root, a loop device, `mkfs.ext4` and `mount`; where any is
//! missing it says so on stderr and checks nothing (set
//! `STRATA_REQUIRE_LOOP=1` to make that a failure).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use strata_pmem::{Backing, ExtentWriter, Placement, Region, RegionOptions};

/// A mounted ext4 on a loop device over a file on a small tmpfs; undone on drop.
struct FlakyDisk {
    root: tempfile::TempDir,
    loop_dev: Option<String>,
    mounted: Vec<PathBuf>,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl FlakyDisk {
    fn new() -> Result<FlakyDisk, String> {
        let root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut disk = FlakyDisk { root, loop_dev: None, mounted: Vec::new() };
        let back = disk.back();
        let mnt = disk.mnt();
        std::fs::create_dir_all(&back).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
        run("mount", &["-t", "tmpfs", "-o", "size=48m", "tmpfs", back.to_str().unwrap()])?;
        disk.mounted.push(back.clone());
        let img = back.join("disk.img");
        std::fs::File::create(&img).and_then(|f| f.set_len(64 << 20)).map_err(|e| e.to_string())?;
        run(
            "mkfs.ext4",
            &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard", img.to_str().unwrap()],
        )?;
        let dev = run("losetup", &["-f", "--show", img.to_str().unwrap()])?;
        disk.loop_dev = Some(dev.clone());
        run("mount", &[&dev, mnt.to_str().unwrap()])?;
        disk.mounted.push(mnt);
        Ok(disk)
    }

    fn back(&self) -> PathBuf {
        self.root.path().join("back")
    }

    fn mnt(&self) -> PathBuf {
        self.root.path().join("mnt")
    }

    /// Fills the tmpfs under the image: from now on the device fails writes
    /// to blocks the image file has not stored yet.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.back().join("fill")).unwrap();
        let chunk = vec![0x5au8; 1 << 20];
        while f.write_all(&chunk).is_ok() {}
    }
}

impl Drop for FlakyDisk {
    fn drop(&mut self) {
        for m in self.mounted.iter().rev() {
            if m.ends_with("back") {
                if let Some(dev) = &self.loop_dev {
                    let _ = run("losetup", &["-d", dev]);
                }
            }
            let _ = run("umount", &["-l", m.to_str().unwrap()]);
        }
    }
}

fn skip(why: &str) {
    if std::env::var("STRATA_REQUIRE_LOOP").is_ok_and(|v| v == "1") {
        panic!("STRATA_REQUIRE_LOOP=1 but: {why}");
    }
    eprintln!("skipped: {why}");
}

/// Stores into every page of the extent `w` writes.
fn write_pages(w: &mut ExtentWriter) {
    while let Some(mut slot) = w.reserve(64 << 10) {
        for at in (0..slot.len()).step_by(4096) {
            slot.write(at, b"payload!").unwrap();
        }
    }
}

#[test]
fn a_write_back_error_is_reported_by_every_later_msync_of_the_region() {
    if !Path::new("/dev/loop-control").exists() {
        return skip("no /dev/loop-control");
    }
    let disk = match FlakyDisk::new() {
        Ok(d) => d,
        Err(e) => return skip(&format!("cannot set up a loop device with ext4: {e}")),
    };
    let opts =
        RegionOptions { len: 16 << 20, slot_bytes: 64 << 10, write_latency_ns: 0, create: true, expect_id: None };
    let (r, _) = Region::open(Backing::File(disk.mnt().join("r.pm")), &opts).unwrap();
    assert_eq!(r.placement(), Placement::File);
    // Written and synced while the device still works.
    let mut a = r.allocate(1, 16, 1).unwrap();
    write_pages(&mut a);
    r.sync_all().unwrap();

    // Allocated (its blocks and head made durable) while the device works,
    // its pages stored once the device fails writes.
    let mut b = r.allocate(1, 64, 2).unwrap();
    disk.fill();
    write_pages(&mut b);
    assert!(r.sync_all().is_err(), "the device failed the write-back");
    // The kernel has reported the error once to the open file that saw it
    // (and would report it once to each other one); the pages are clean
    // again. Without the region remembering, these would succeed: more of
    // them than the region has open files for msync.
    for _ in 0..16 {
        assert!(r.sync_all().is_err());
        assert!(r.sync(0, 4096).is_err());
    }
    drop((a, b, r));
}
