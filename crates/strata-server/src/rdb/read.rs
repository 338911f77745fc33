//! Reading an RDB file (versions 1 to 11: what Redis 7.2 and older write)
//! from any [`std::io::Read`], incrementally: each key is decoded and
//! handed to a callback before the next is read, so memory holds one
//! value at a time (up to [`ReadOptions::max_value_bytes`] decoded).
//!
//! Opcodes: `AUX` (handed on), `SELECTDB`, `RESIZEDB` (a hint, skipped),
//! `EXPIRETIME`, `EXPIRETIME_MS`, `FREQ` and `IDLE` (skipped), `FUNCTION2`
//! (a function library's code, handed on for the caller to load), `EOF`,
//! then the CRC-64, checked unless zero (Redis with `rdbchecksum no`).
//! Refused, each with a clear error: `MODULE_AUX` and module types (no
//! modules here), the function format of Redis 7.0 release candidates,
//! streams, and Redis 2.x's zipmap hashes. Values are decoded by the same
//! decoders as RESTORE ([`super::decode`]).
//!
//! The reader takes from `src` exactly the file's bytes, nothing after its
//! checksum, so a caller reading an RDB stream inside a connection (a full
//! sync) goes on reading the connection afterwards. It reads in small
//! pieces: give it a buffered reader (`&mut BufReader<..>`).

use std::fmt;
use std::io::{self, Read};

use super::decode::{Budget, Decoder, Input};
use super::write::{
    OP_AUX, OP_EOF, OP_EXPIRETIME, OP_EXPIRETIME_MS, OP_FREQ, OP_FUNCTION2, OP_FUNCTION_PRE_GA, OP_IDLE, OP_MODULE_AUX,
    OP_RESIZEDB, OP_SELECTDB,
};
use super::{is_empty, members_unique, Refused, Value, CRC, NEWEST_VERSION};

/// Limits of a read.
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions {
    /// What one key's value may decode to, counting each element's bytes
    /// plus 64: a larger key is refused ([`ReadErrorKind::TooLarge`]).
    pub max_value_bytes: u64,
}

impl Default for ReadOptions {
    /// Values of up to 1 GiB decoded.
    fn default() -> Self {
        ReadOptions { max_value_bytes: 1 << 30 }
    }
}

/// What a decoded element costs beyond its bytes (a `Vec` and its heap
/// block).
const ENTRY_COST: u64 = 64;

/// One key of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Its database (the last `SELECTDB`; 0 before any).
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Value,
    /// Its expiry in Unix milliseconds, if it has one (possibly already
    /// past: Redis loads such keys on a replica and drops them on a
    /// primary; the caller decides).
    pub expire_ms: Option<u64>,
}

/// What the reader hands to its callback, in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An `AUX` field (`redis-ver`, `repl-id`, `repl-offset`, ...).
    Aux {
        /// Its name.
        name: Vec<u8>,
        /// Its value.
        value: Vec<u8>,
    },
    /// A function library (`FUNCTION2`): its code, as `FUNCTION LOAD`
    /// takes it.
    Function {
        /// The library's code (with its `#!lua name=...` line).
        code: Vec<u8>,
    },
    /// A key.
    Key(Entry),
}

/// What a whole file held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The file's RDB version.
    pub version: u16,
    /// Keys handed on.
    pub keys: u64,
    /// Empty collections skipped (as Redis skips them).
    pub empty_skipped: u64,
    /// Whether a checksum was there and checked (zero: not computed by
    /// the writer; version < 5: none).
    pub checksum_checked: bool,
    /// Bytes read, the checksum included.
    pub bytes: u64,
}

/// Why a file was refused.
#[derive(Debug)]
pub enum ReadErrorKind {
    /// Reading `src` failed, or it ended early.
    Io(io::Error),
    /// No `REDIS` magic.
    NotRdb,
    /// A version this reader does not know.
    Version(String),
    /// Bytes that are not what the format allows there.
    Format(String),
    /// A value larger than [`ReadOptions::max_value_bytes`] or a string
    /// longer than the server's longest.
    TooLarge(String),
    /// Something valid that this server does not hold (modules, streams).
    Unsupported(String),
    /// The CRC-64 at the end disagrees with the file.
    Checksum {
        /// What the file says.
        stored: u64,
        /// What its bytes give.
        computed: u64,
    },
    /// The callback refused an item.
    Stopped(String),
}

/// A refused file: what, and the byte offset of the record it is in.
#[derive(Debug)]
pub struct ReadError {
    /// Offset of the record (opcode or type byte) the error is in.
    pub offset: u64,
    /// What went wrong.
    pub kind: ReadErrorKind,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RDB record at byte {}: ", self.offset)?;
        match &self.kind {
            ReadErrorKind::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => write!(f, "the stream ended early"),
            ReadErrorKind::Io(e) => write!(f, "read failed: {e}"),
            ReadErrorKind::NotRdb => write!(f, "not an RDB file (no REDIS magic)"),
            ReadErrorKind::Version(v) => write!(f, "RDB version {v} is not supported (1 to {NEWEST_VERSION})"),
            ReadErrorKind::Format(m) => write!(f, "bad format: {m}"),
            ReadErrorKind::TooLarge(m) => write!(f, "too large: {m}"),
            ReadErrorKind::Unsupported(m) => write!(f, "unsupported: {m}"),
            ReadErrorKind::Checksum { stored, computed } => {
                write!(f, "wrong checksum: the file says {stored:016x}, its bytes give {computed:016x}")
            }
            ReadErrorKind::Stopped(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// The file as a decoder input: counts the offset, sums the CRC, and
/// keeps the I/O error a decoder can only report as a refusal.
struct Stream<R> {
    src: R,
    offset: u64,
    crc: crc::Digest<'static, u64>,
    failed: Option<io::Error>,
}

/// The most a read of a string allocates ahead of the bytes arriving
/// (a damaged length must not allocate gigabytes at once).
const TAKE_CHUNK: usize = 64 << 10;

impl<R: Read> Input for Stream<R> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), Refused> {
        match self.src.read_exact(buf) {
            Ok(()) => {
                self.crc.update(buf);
                self.offset += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e);
                Err(Refused::BadFormat)
            }
        }
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, Refused> {
        let mut v = Vec::with_capacity(n.min(TAKE_CHUNK));
        while v.len() < n {
            let start = v.len();
            v.resize(start + (n - start).min(TAKE_CHUNK), 0);
            let (_, fresh) = v.split_at_mut(start);
            self.fill(fresh)?;
        }
        Ok(v)
    }

    fn left(&self) -> Option<usize> {
        None
    }
}

/// Reads an RDB file from `src`, calling `on` with each AUX field,
/// function library and key in file order; stops at the first error (of
/// the file, or `on`'s).
pub fn read_rdb<R: Read>(
    src: R,
    opts: &ReadOptions,
    on: &mut dyn FnMut(Item) -> Result<(), String>,
) -> Result<Summary, ReadError> {
    let mut r = FileReader { s: Stream { src, offset: 0, crc: CRC.digest(), failed: None }, opts: *opts, at: 0 };
    r.run(on)
}

struct FileReader<R> {
    s: Stream<R>,
    opts: ReadOptions,
    /// Offset of the record being read.
    at: u64,
}

impl<R: Read> FileReader<R> {
    fn error(&mut self, kind: ReadErrorKind) -> ReadError {
        ReadError { offset: self.at, kind }
    }

    /// A decoder refusal as an error, `what` naming what was being read.
    fn refused(&mut self, e: Refused, what: &str) -> ReadError {
        let here = self.s.offset;
        let kind = match (self.s.failed.take(), e) {
            (Some(io), _) => ReadErrorKind::Io(io),
            (None, Refused::TooLarge) => ReadErrorKind::TooLarge(format!("{what} (at byte {here})")),
            (None, _) => ReadErrorKind::Format(format!("{what} (at byte {here})")),
        };
        self.error(kind)
    }

    /// Runs `f` on a decoder with a fresh value budget.
    fn decode<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Decoder<'_, Stream<R>>) -> Result<T, Refused>,
    ) -> Result<T, ReadError> {
        let mut budget = Budget { left: self.opts.max_value_bytes, entry_cost: ENTRY_COST };
        let res = f(&mut Decoder { input: &mut self.s, budget: &mut budget });
        res.map_err(|e| self.refused(e, what))
    }

    fn run(&mut self, on: &mut dyn FnMut(Item) -> Result<(), String>) -> Result<Summary, ReadError> {
        let magic: [u8; 9] = self.decode("the header", |d| d.array())?;
        let (head, digits) = magic.split_at(5);
        if head != b"REDIS" {
            return Err(self.error(ReadErrorKind::NotRdb));
        }
        let text = String::from_utf8_lossy(digits).into_owned();
        let version = match text.parse::<u16>() {
            Ok(v) if (1..=NEWEST_VERSION).contains(&v) && digits.iter().all(u8::is_ascii_digit) => v,
            _ => return Err(self.error(ReadErrorKind::Version(text))),
        };
        let mut sum = Summary { version, ..Summary::default() };
        let mut db = 0u64;
        let mut expire: Option<u64> = None;
        loop {
            self.at = self.s.offset;
            let op = self.decode("an opcode", |d| d.byte())?;
            match op {
                OP_EOF => break,
                OP_AUX => {
                    let (name, value) = self.decode("an AUX field", |d| Ok((d.raw_string()?, d.raw_string()?)))?;
                    self.hand(on, Item::Aux { name, value })?;
                }
                OP_SELECTDB => db = self.decode("SELECTDB", |d| d.plain_len())?,
                OP_RESIZEDB => {
                    self.decode("RESIZEDB", |d| Ok((d.plain_len()?, d.plain_len()?)))?;
                }
                OP_EXPIRETIME_MS => {
                    let ms = self.decode("EXPIRETIME_MS", |d| Ok(i64::from_le_bytes(d.array()?)))?;
                    expire = Some(u64::try_from(ms).unwrap_or(0));
                }
                OP_EXPIRETIME => {
                    let s = self.decode("EXPIRETIME", |d| Ok(i32::from_le_bytes(d.array()?)))?;
                    expire = Some(u64::try_from(i64::from(s) * 1000).unwrap_or(0));
                }
                OP_FREQ => {
                    self.decode("FREQ", |d| d.byte())?;
                }
                OP_IDLE => {
                    self.decode("IDLE", |d| d.plain_len())?;
                }
                OP_FUNCTION2 => {
                    let code = self.decode("a function library", |d| d.raw_string())?;
                    self.hand(on, Item::Function { code })?;
                }
                OP_MODULE_AUX => {
                    return Err(
                        self.error(ReadErrorKind::Unsupported("module data (MODULE_AUX): no modules here".into()))
                    )
                }
                OP_FUNCTION_PRE_GA => {
                    let m = "functions in the format of Redis 7.0 release candidates (FUNCTION opcode 246)";
                    return Err(self.error(ReadErrorKind::Unsupported(m.into())));
                }
                t => {
                    if let Some(what) = unsupported_type(t) {
                        return Err(self.error(ReadErrorKind::Unsupported(format!("value type {t} ({what})"))));
                    }
                    if !matches!(t, 0..=5 | 10..=14 | 16..=18 | 20) {
                        return Err(self.error(ReadErrorKind::Format(format!("unknown opcode or value type {t}"))));
                    }
                    let key = self.decode("a key", |d| d.raw_string())?;
                    let what = format!("the value of key {:?} (type {t})", String::from_utf8_lossy(&key));
                    let value = self.decode(&what, |d| d.object_of(t))?;
                    let exp = expire.take();
                    if is_empty(&value) {
                        sum.empty_skipped += 1;
                        continue;
                    }
                    if !members_unique(&value) {
                        return Err(self.error(ReadErrorKind::Format(format!("{what} holds a member twice"))));
                    }
                    sum.keys += 1;
                    self.hand(on, Item::Key(Entry { db, key, value, expire_ms: exp }))?;
                }
            }
        }
        if version >= 5 {
            let computed = std::mem::replace(&mut self.s.crc, CRC.digest()).finalize();
            self.at = self.s.offset;
            let stored = self.decode("the checksum", |d| Ok(u64::from_le_bytes(d.array()?)))?;
            if stored != 0 {
                if stored != computed {
                    return Err(self.error(ReadErrorKind::Checksum { stored, computed }));
                }
                sum.checksum_checked = true;
            }
        }
        sum.bytes = self.s.offset;
        Ok(sum)
    }

    fn hand(&mut self, on: &mut dyn FnMut(Item) -> Result<(), String>, item: Item) -> Result<(), ReadError> {
        on(item).map_err(|m| self.error(ReadErrorKind::Stopped(m)))
    }
}

/// What a valid value type this reader refuses is.
fn unsupported_type(t: u8) -> Option<&'static str> {
    Some(match t {
        6 | 7 => "a module's value: no modules here",
        9 => "a zipmap hash of Redis before 2.6",
        15 | 19 | 21 => "a stream: streams are not supported",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::write::{Header, RdbWriter};
    use super::*;

    fn items(file: &[u8]) -> Result<(Vec<Item>, Summary), ReadError> {
        let mut got = Vec::new();
        let sum = read_rdb(file, &ReadOptions::default(), &mut |i| {
            got.push(i);
            Ok(())
        })?;
        Ok((got, sum))
    }

    fn keys(file: &[u8]) -> Vec<Entry> {
        let (all, _) = items(file).unwrap();
        all.into_iter().filter_map(|i| if let Item::Key(e) = i { Some(e) } else { None }).collect()
    }

    fn small_file() -> Vec<u8> {
        let mut w = RdbWriter::start(Vec::new(), &Header::now("7.0.15", 0)).unwrap();
        w.select_db(0, 2, 1).unwrap();
        w.key(b"s", &Value::String(b"v".to_vec()), 0).unwrap();
        w.key(b"l", &Value::List(vec![b"a".to_vec(), b"b".to_vec()]), 5000).unwrap();
        w.select_db(3, 1, 0).unwrap();
        w.function(b"#!lua name=lib\nredis.register_function('f', function() return 1 end)").unwrap();
        w.key(b"z", &Value::ZSet(vec![(b"m".to_vec(), f64::INFINITY)]), 0).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn written_files_read_back() {
        let (all, sum) = items(&small_file()).unwrap();
        assert_eq!(sum.keys, 3);
        assert!(sum.checksum_checked);
        assert_eq!(sum.version, 10);
        assert!(all.iter().any(|i| matches!(i, Item::Aux { name, .. } if name == b"redis-ver")));
        assert!(all.iter().any(|i| matches!(i, Item::Function { code } if code.starts_with(b"#!lua"))));
        let k = keys(&small_file());
        assert_eq!(
            k[1],
            Entry {
                db: 0,
                key: b"l".to_vec(),
                value: Value::List(vec![b"a".to_vec(), b"b".to_vec()]),
                expire_ms: Some(5000)
            }
        );
        assert_eq!(k[2].db, 3);
        assert_eq!(k[0].expire_ms, None);
    }

    #[test]
    fn every_damage_is_an_error_naming_an_offset() {
        let good = small_file();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            match items(&bad) {
                Err(e) => assert!(e.to_string().starts_with("RDB record at byte "), "{e}"),
                // A flipped bit the format cannot see is still caught by the checksum.
                Ok(_) => panic!("flipped byte {i} accepted"),
            }
        }
        for cut in 0..good.len() {
            let e = items(&good[..cut]).unwrap_err();
            assert!(matches!(e.kind, ReadErrorKind::Io(_) | ReadErrorKind::NotRdb), "cut at {cut}: {e}");
        }
    }

    #[test]
    fn zero_checksum_is_not_checked_and_trailing_bytes_are_left() {
        let mut f = small_file();
        let n = f.len();
        f[n - 8..].fill(0);
        f.extend_from_slice(b"NEXT");
        let mut src: &[u8] = &f;
        let sum = read_rdb(&mut src, &ReadOptions::default(), &mut |_| Ok(())).unwrap();
        assert!(!sum.checksum_checked);
        assert_eq!(src, b"NEXT", "nothing after the checksum is read");
    }

    #[test]
    fn refusals_are_clear() {
        let head = b"REDIS0010\xfe\x00".to_vec();
        let with = |body: &[u8]| {
            let mut f = head.clone();
            f.extend_from_slice(body);
            items(&f).unwrap_err()
        };
        assert!(matches!(with(&[15, 1, b'k']).kind, ReadErrorKind::Unsupported(ref m) if m.contains("stream")));
        assert!(matches!(with(&[OP_MODULE_AUX]).kind, ReadErrorKind::Unsupported(_)));
        assert!(matches!(with(&[99]).kind, ReadErrorKind::Format(_)));
        let e = with(&[2, 1, b's', 2, 1, b'a', 1, b'a']);
        assert!(e.to_string().contains("twice"), "{e}");
        assert_eq!(e.offset, 11);
        assert!(matches!(items(b"REDIS0012\xff").unwrap_err().kind, ReadErrorKind::Version(_)));
        assert!(matches!(items(b"RODIS0010\xff").unwrap_err().kind, ReadErrorKind::NotRdb));
        // A stopped callback stops the read.
        let e = read_rdb(&small_file()[..], &ReadOptions::default(), &mut |i| match i {
            Item::Key(_) => Err("no room".into()),
            _ => Ok(()),
        })
        .unwrap_err();
        assert!(e.to_string().contains("no room"));
        // A value past the budget.
        let e = read_rdb(&small_file()[..], &ReadOptions { max_value_bytes: 10 }, &mut |_| Ok(())).unwrap_err();
        assert!(matches!(e.kind, ReadErrorKind::TooLarge(_)), "{e}");
    }
}
