//! What the operating system says about this process and its files
//! (Linux `/proc`); every reader returns 0 where the information is missing.

use std::path::Path;

/// Bytes this process caused to be read from / written to storage so far
/// (`read_bytes`, `write_bytes` of `/proc/self/io`; page-granular, counted
/// when pages are dirtied, so writes through a memory map count too, while
/// files on tmpfs such as /dev/shm do not).
pub fn proc_io() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    (field(&text, "read_bytes:"), field(&text, "write_bytes:"))
}

/// CPU seconds (user + system) this process used so far, every thread
/// included (`utime` + `stime` of `/proc/self/stat`, in clock ticks of 1/100 s).
pub fn proc_cpu_secs() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its ')'.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Fields 14 and 15 of the line are the 12th and 13th after the name.
    (tick(11) + tick(12)) as f64 / 100.0
}

/// Peak resident set size of this process in bytes (`VmHWM`).
pub fn peak_rss_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    field(&text, "VmHWM:") * 1024
}

fn field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Bytes allocated on disk by everything under `path` (like `du`; a sparse
/// PM region file counts only what is written).
pub fn disk_usage(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return 0;
        };
        entries.flatten().map(|e| disk_usage(&e.path())).sum()
    } else {
        meta.blocks() * 512
    }
}

/// Disk space of a store at one moment: its database directory, its PM
/// region file, and both together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// Allocated bytes under the database directory.
    pub db: u64,
    /// Allocated bytes of the PM region file (0 without one).
    pub pm_file: u64,
    /// Both, the PM file counted once when it lives inside the directory.
    pub total: u64,
}

/// The [`StoreUsage`] of database directory `db` and PM region file `pm_file`.
pub fn store_usage(db: &Path, pm_file: Option<&Path>) -> StoreUsage {
    let db_bytes = disk_usage(db);
    let Some(pm) = pm_file else {
        return StoreUsage { db: db_bytes, pm_file: 0, total: db_bytes };
    };
    let pm_bytes = disk_usage(pm);
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let inside = real(pm).starts_with(real(db));
    StoreUsage { db: db_bytes, pm_file: pm_bytes, total: if inside { db_bytes } else { db_bytes + pm_bytes } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_fields() {
        let t = "rchar: 10\nread_bytes: 4096\nwrite_bytes: 8192\n";
        assert_eq!(field(t, "read_bytes:"), 4096);
        assert_eq!(field(t, "write_bytes:"), 8192);
        assert_eq!(field(t, "missing:"), 0);
        assert_eq!(field("VmHWM:\t  1234 kB\n", "VmHWM:"), 1234);
    }

    #[test]
    fn disk_usage_counts_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), vec![1u8; 10_000]).unwrap();
        assert!(disk_usage(d.path()) >= 10_000);
        assert_eq!(disk_usage(&d.path().join("nope")), 0);
        assert!(peak_rss_bytes() > 0);
    }

    #[test]
    fn store_usage_counts_the_pm_file_once() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("db");
        std::fs::create_dir_all(db.join("pm")).unwrap();
        std::fs::write(db.join("table"), vec![1u8; 20_000]).unwrap();
        std::fs::write(db.join("pm/strata.pm"), vec![1u8; 10_000]).unwrap();
        let inside = store_usage(&db, Some(&db.join("pm/strata.pm")));
        assert!(inside.pm_file >= 10_000 && inside.db >= 30_000, "{inside:?}");
        assert_eq!(inside.total, inside.db);
        std::fs::create_dir_all(d.path().join("shm")).unwrap();
        std::fs::rename(db.join("pm/strata.pm"), d.path().join("shm/strata.pm")).unwrap();
        let outside = store_usage(&db, Some(&d.path().join("shm/strata.pm")));
        assert_eq!(outside.total, outside.db + outside.pm_file);
        assert!(outside.pm_file >= 10_000 && outside.db < inside.db, "{outside:?}");
        assert_eq!(store_usage(&db, None).total, outside.db);
    }
}
