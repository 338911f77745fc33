//! How a replica takes in a full sync's RDB image, as
//! `repl-diskless-load` says: straight from the socket into the emptied
//! keyspace (`on-empty-db` when the keyspace is empty), or first into a
//! file beside the data (`disabled`, Redis's default, and `swapdb`), so a
//! transfer cut in the middle leaves the old data whole and served. Either
//! way memory does not grow with the image: it is read key by key.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};

use super::end::End;
use super::settings::DisklessLoad;
use super::{Applier, State};
use crate::rdb::read::{read_rdb, Item, ReadOptions};

/// How the primary frames the image.
enum Size {
    /// `$<len>`: that many bytes.
    Len(u64),
    /// `$EOF:<mark>`: the image, then the 40-byte mark.
    Eof([u8; 40]),
}

impl Size {
    fn of(header: &str) -> Result<Size, End> {
        match header.strip_prefix("$EOF:") {
            Some(mark) => {
                let mark: [u8; 40] =
                    mark.as_bytes().try_into().map_err(|_| End::Failed(format!("bad EOF mark in {header:?}")))?;
                Ok(Size::Eof(mark))
            }
            None => {
                let len = header.strip_prefix('$').and_then(|n| n.parse::<u64>().ok());
                Ok(Size::Len(len.ok_or_else(|| End::Failed(format!("expected the RDB image, got {header:?}")))?))
            }
        }
    }
}

/// Loads the RDB image announced by `header` (`$<len>` or `$EOF:<mark>`)
/// into the emptied keyspace, key by key; keys already expired are skipped.
pub(super) fn load_image(
    state: &State,
    applier: &mut dyn Applier,
    r: &mut BufReader<TcpStream>,
    header: &str,
    generation: u64,
) -> Result<(), End> {
    let size = Size::of(header)?;
    state.sync_total.store(
        match size {
            Size::Len(n) => n as i64,
            Size::Eof(_) => -1,
        },
        Ordering::Relaxed,
    );
    let mut socket = Counting { inner: r, read: &state.sync_read };
    let spool = match state.settings.diskless_load() {
        DisklessLoad::OnEmptyDb => !applier.is_empty(),
        DisklessLoad::Disabled | DisklessLoad::Swapdb => true,
    };
    if !spool {
        applier.flush_all()?;
        let read = read_framed(&mut socket, &size, &mut |item| apply(state, applier, generation, item));
        return settle(state, applier, generation, read);
    }
    let path = state.spool_path();
    let loaded = (|| {
        let mut tee = Tee { inner: &mut socket, out: BufWriter::new(File::create(&path)?) };
        // The whole image first, checked (its checksum, its end) but not
        // applied: until it is complete the old data stays.
        read_framed(&mut tee, &size, &mut |_| {
            state.touched();
            if state.stale(generation) || applier.stopping() {
                return Err("stopped".into());
            }
            Ok(())
        })?;
        tee.out.flush()?;
        drop(tee);
        applier.flush_all()?;
        let file = BufReader::with_capacity(1 << 16, File::open(&path)?);
        // The file holds the image, then perhaps the EOF mark: the reader
        // stops at the image's own end.
        read_rdb(file, &ReadOptions::default(), &mut |item| apply(state, applier, generation, item))
            .map(drop)
            .map_err(|e| End::Failed(format!("loading the primary's image: {e}")))
    })();
    let _ = fs::remove_file(&path);
    settle(state, applier, generation, loaded)
}

/// A load's outcome, `End::Stopped` if it ended because REPLICAOF changed
/// or the server stops.
fn settle(state: &State, applier: &dyn Applier, generation: u64, r: Result<(), End>) -> Result<(), End> {
    match r {
        Err(End::Failed(_)) if state.stale(generation) || applier.stopping() => Err(End::Stopped),
        r => r,
    }
}

/// Reads one framed image from `r`, giving each item to `on`.
fn read_framed(r: &mut dyn Read, size: &Size, on: &mut dyn FnMut(Item) -> Result<(), String>) -> Result<(), End> {
    let opts = ReadOptions::default();
    let read = match size {
        Size::Len(len) => {
            let mut part = r.take(*len);
            let read = read_rdb(&mut part, &opts, on);
            // Whatever follows the image's checksum within its length.
            if read.is_ok() {
                io::copy(&mut part, &mut io::sink())?;
            }
            read
        }
        Size::Eof(mark) => {
            let read = read_rdb(&mut *r, &opts, on);
            if read.is_ok() {
                let mut end = [0u8; 40];
                r.read_exact(&mut end)?;
                if &end != mark {
                    return Err(End::Failed("the diskless image did not end with its EOF mark".into()));
                }
            }
            read
        }
    };
    read.map(drop).map_err(|e| End::Failed(format!("loading the primary's image: {e}")))
}

/// Writes one item of the image into the keyspace.
fn apply(state: &State, applier: &mut dyn Applier, generation: u64, item: Item) -> Result<(), String> {
    if state.stale(generation) || applier.stopping() {
        return Err("stopped".into());
    }
    state.touched();
    match item {
        Item::Key(e) => {
            if e.expire_ms.is_some_and(|at| at <= crate::keyspace::now_ms()) {
                return Ok(());
            }
            applier.load(e)
        }
        Item::Function { code } => applier.load_function(code),
        Item::Aux { .. } => Ok(()),
    }
}

/// A reader counting the bytes read (INFO's `master_sync_read_bytes`).
struct Counting<'a, R> {
    inner: R,
    read: &'a AtomicU64,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A reader that writes what it reads into `out` (the spool file).
struct Tee<'a, R> {
    inner: &'a mut R,
    out: BufWriter<File>,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.write_all(buf.get(..n).unwrap_or_default())?;
        Ok(n)
    }
}
