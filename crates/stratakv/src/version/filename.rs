//! Names of the files in a data directory.

use std::path::{Path, PathBuf};

/// A file the engine owns, recognised from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `<n>.sst`
    Table(u64),
    /// `MANIFEST-<n>`
    Manifest(u64),
    /// `CURRENT`
    Current,
    /// `LOCK`
    Lock,
    /// A temporary file (`*.dbtmp`).
    Temp,
}

/// `<dir>/<n>.sst` (six digits, more if needed).
pub fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// `<dir>/MANIFEST-<n>`.
pub fn manifest_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("MANIFEST-{number:06}"))
}

/// `<dir>/CURRENT`.
pub fn current_path(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// `<dir>/LOCK`.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// A temporary file name for `number`.
pub fn temp_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.dbtmp"))
}

/// Classifies a directory entry name.
pub fn parse(name: &str) -> Option<FileKind> {
    if name == "CURRENT" {
        return Some(FileKind::Current);
    }
    if name == "LOCK" {
        return Some(FileKind::Lock);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return n.parse().ok().map(FileKind::Table);
    }
    if name.ends_with(".dbtmp") {
        return Some(FileKind::Temp);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/x");
        assert_eq!(parse(table_path(d, 7).file_name().unwrap().to_str().unwrap()), Some(FileKind::Table(7)));
        assert_eq!(
            parse(manifest_path(d, 1234567).file_name().unwrap().to_str().unwrap()),
            Some(FileKind::Manifest(1234567))
        );
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse("foo"), None);
        assert_eq!(parse("x.sst"), None);
    }
}
