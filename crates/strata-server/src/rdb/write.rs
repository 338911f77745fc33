//! Writing an RDB file (version 10, what Redis 7.0 writes) into any
//! [`std::io::Write`], one record at a time: the header and AUX fields,
//! `SELECTDB` + `RESIZEDB` per database, each key (an optional
//! `EXPIRETIME_MS`, the type byte, the key, the value), `EOF` and the
//! CRC-64 of everything before it.
//!
//! Values use the plain RDB types DUMP writes (string, list, set, hash,
//! sorted set with binary scores), which every Redis since 4.0 loads. A
//! collection can be written whole ([`RdbWriter::key`]) or streamed: its
//! header with the element count ([`RdbWriter::begin`]), then each element
//! ([`RdbWriter::item`], [`RdbWriter::pair`], [`RdbWriter::scored`]), so a
//! collection of any size passes through in bounded memory.
//!
//! The writer does not check the order of what it is given: callers write
//! a collection's elements right after its header, exactly as many as
//! announced ([`RdbWriter::finish`] refuses a collection left short).

use std::io::{self, Write};

use super::{put_len, put_string, Value, CRC, DUMP_VERSION, T_HASH, T_LIST, T_SET, T_STRING, T_ZSET_2};

/// `AUX` field (name, value).
pub const OP_AUX: u8 = 0xfa;
/// `RESIZEDB` keys expires: hash table sizes of the current database.
pub const OP_RESIZEDB: u8 = 0xfb;
/// `EXPIRETIME_MS` ms (8 bytes LE): the next key's expiry.
pub const OP_EXPIRETIME_MS: u8 = 0xfc;
/// `EXPIRETIME` s (4 bytes LE): the next key's expiry (RDB < 9).
pub const OP_EXPIRETIME: u8 = 0xfd;
/// `SELECTDB` n: the following keys are in database n.
pub const OP_SELECTDB: u8 = 0xfe;
/// End of the keys; the CRC-64 follows (RDB >= 5).
pub const OP_EOF: u8 = 0xff;
/// `FREQ` (1 byte): the next key's LFU counter.
pub const OP_FREQ: u8 = 0xf9;
/// `IDLE` len: the next key's LRU idle time.
pub const OP_IDLE: u8 = 0xf8;
/// `MODULE_AUX`: a module's data outside any key.
pub const OP_MODULE_AUX: u8 = 0xf7;
/// `FUNCTION` of Redis 7.0 release candidates (another format).
pub const OP_FUNCTION_PRE_GA: u8 = 0xf6;
/// `FUNCTION2` code: a function library (Redis 7).
pub const OP_FUNCTION2: u8 = 0xf5;

/// The replication state an image is taken at (a full sync's
/// `repl-id`/`repl-offset`/`repl-stream-db` AUX fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplInfo {
    /// The replication id (40 hex characters).
    pub id: String,
    /// The replication offset the image holds every write up to.
    pub offset: i64,
    /// The database the command stream after the image starts in.
    pub stream_db: u64,
}

/// The AUX fields at the head of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// `redis-ver`: the Redis version the writer claims to be.
    pub redis_ver: String,
    /// `ctime`: when the image was taken, Unix seconds.
    pub ctime: u64,
    /// `used-mem`: the writer's memory use in bytes.
    pub used_mem: u64,
    /// The replication fields, for a full sync.
    pub repl: Option<ReplInfo>,
}

impl Header {
    /// A header claiming `redis_ver`, taken now, without replication fields.
    pub fn now(redis_ver: &str, used_mem: u64) -> Header {
        let ctime = crate::keyspace::now_ms() / 1000;
        Header { redis_ver: redis_ver.to_string(), ctime, used_mem, repl: None }
    }
}

/// The kind of a collection streamed element by element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collection {
    /// A list: [`RdbWriter::item`] per element, head first.
    List,
    /// A set: [`RdbWriter::item`] per member.
    Set,
    /// A hash: [`RdbWriter::pair`] per field.
    Hash,
    /// A sorted set: [`RdbWriter::scored`] per member.
    ZSet,
}

/// A sink that keeps the CRC-64 of what passes through and counts it.
struct Summing<W> {
    out: W,
    crc: crc::Digest<'static, u64>,
    written: u64,
}

impl<W: Write> Summing<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc.update(b);
        self.written += b.len() as u64;
        self.out.write_all(b)
    }
}

/// An RDB file being written into `W`. Small records are gathered in a
/// buffer of a few KiB; large strings go straight through.
pub struct RdbWriter<W: Write> {
    sink: Summing<W>,
    buf: Vec<u8>,
    /// Elements still owed by the collection being streamed.
    owed: u64,
}

/// Gathered bytes pass to the sink beyond this.
const FLUSH_AT: usize = 16 << 10;

impl<W: Write> RdbWriter<W> {
    /// Starts a file: the `REDIS0010` magic and the AUX fields Redis 7.0
    /// writes (`redis-ver`, `redis-bits`, `ctime`, `used-mem`, the
    /// replication fields when given, `aof-base`).
    pub fn start(out: W, header: &Header) -> io::Result<RdbWriter<W>> {
        let sink = Summing { out, crc: CRC.digest(), written: 0 };
        let mut w = RdbWriter { sink, buf: Vec::with_capacity(FLUSH_AT * 2), owed: 0 };
        w.buf.extend_from_slice(format!("REDIS{DUMP_VERSION:04}").as_bytes());
        w.aux(b"redis-ver", header.redis_ver.as_bytes())?;
        w.aux(b"redis-bits", (usize::BITS).to_string().as_bytes())?;
        w.aux(b"ctime", header.ctime.to_string().as_bytes())?;
        w.aux(b"used-mem", header.used_mem.to_string().as_bytes())?;
        if let Some(r) = &header.repl {
            w.aux(b"repl-stream-db", r.stream_db.to_string().as_bytes())?;
            w.aux(b"repl-id", r.id.as_bytes())?;
            w.aux(b"repl-offset", r.offset.to_string().as_bytes())?;
        }
        w.aux(b"aof-base", b"0")?;
        Ok(w)
    }

    /// Bytes written so far (to the sink, and gathered).
    pub fn written(&self) -> u64 {
        self.sink.written + self.buf.len() as u64
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        let buf = std::mem::take(&mut self.buf);
        let r = self.sink.put(&buf);
        self.buf = buf;
        self.buf.clear();
        r
    }

    /// An RDB string; one of more than [`FLUSH_AT`] bytes goes to the sink
    /// without a copy.
    fn string(&mut self, s: &[u8]) -> io::Result<()> {
        if s.len() < FLUSH_AT {
            put_string(&mut self.buf, s);
            return self.spill();
        }
        put_len(&mut self.buf, s.len() as u64);
        self.flush_buf()?;
        self.sink.put(s)
    }

    fn idle(&self) -> io::Result<()> {
        if self.owed > 0 {
            return Err(io::Error::other(format!("a collection is still owed {} elements", self.owed)));
        }
        Ok(())
    }

    /// An `AUX` field.
    pub fn aux(&mut self, name: &[u8], value: &[u8]) -> io::Result<()> {
        self.idle()?;
        self.buf.push(OP_AUX);
        self.string(name)?;
        self.string(value)
    }

    /// `SELECTDB db` and `RESIZEDB keys expires` (sizes Redis presizes
    /// its tables with; a hint, not checked).
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) -> io::Result<()> {
        self.idle()?;
        self.buf.push(OP_SELECTDB);
        put_len(&mut self.buf, db);
        self.buf.push(OP_RESIZEDB);
        put_len(&mut self.buf, keys);
        put_len(&mut self.buf, expires);
        self.spill()
    }

    /// A `FUNCTION2` record: a function library's code (as `FUNCTION
    /// LOAD` takes it).
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        self.idle()?;
        self.buf.push(OP_FUNCTION2);
        self.string(code)
    }

    /// The expiry (0: none), type byte and key of a record.
    fn key_head(&mut self, kind: u8, key: &[u8], expire_ms: u64) -> io::Result<()> {
        self.idle()?;
        if expire_ms != 0 {
            self.buf.push(OP_EXPIRETIME_MS);
            self.buf.extend_from_slice(&expire_ms.to_le_bytes());
        }
        self.buf.push(kind);
        self.string(key)
    }

    /// A whole key: `expire_ms` (0: none), key and value.
    pub fn key(&mut self, key: &[u8], value: &Value, expire_ms: u64) -> io::Result<()> {
        match value {
            Value::String(s) => {
                self.key_head(T_STRING, key, expire_ms)?;
                self.string(s)
            }
            Value::List(items) | Value::Set(items) => {
                let kind = if matches!(value, Value::List(_)) { Collection::List } else { Collection::Set };
                self.begin(kind, key, items.len() as u64, expire_ms)?;
                items.iter().try_for_each(|i| self.item(i))
            }
            Value::Hash(pairs) => {
                self.begin(Collection::Hash, key, pairs.len() as u64, expire_ms)?;
                pairs.iter().try_for_each(|(f, v)| self.pair(f, v))
            }
            Value::ZSet(members) => {
                self.begin(Collection::ZSet, key, members.len() as u64, expire_ms)?;
                members.iter().try_for_each(|(m, s)| self.scored(m, *s))
            }
        }
    }

    /// The head of a collection of `count` elements, which the next
    /// `count` calls of the kind's element method write.
    pub fn begin(&mut self, kind: Collection, key: &[u8], count: u64, expire_ms: u64) -> io::Result<()> {
        let t = match kind {
            Collection::List => T_LIST,
            Collection::Set => T_SET,
            Collection::Hash => T_HASH,
            Collection::ZSet => T_ZSET_2,
        };
        self.key_head(t, key, expire_ms)?;
        put_len(&mut self.buf, count);
        self.owed = count;
        self.spill()
    }

    fn take_one(&mut self) -> io::Result<()> {
        self.owed =
            self.owed.checked_sub(1).ok_or_else(|| io::Error::other("more elements than the collection announced"))?;
        Ok(())
    }

    /// A list element or set member.
    pub fn item(&mut self, item: &[u8]) -> io::Result<()> {
        self.take_one()?;
        self.string(item)
    }

    /// A hash field and its value.
    pub fn pair(&mut self, field: &[u8], value: &[u8]) -> io::Result<()> {
        self.take_one()?;
        self.string(field)?;
        self.string(value)
    }

    /// A sorted-set member and its score (binary double).
    pub fn scored(&mut self, member: &[u8], score: f64) -> io::Result<()> {
        self.take_one()?;
        self.string(member)?;
        self.buf.extend_from_slice(&score.to_le_bytes());
        self.spill()
    }

    /// Ends the file: `EOF` and the CRC-64 of everything before it; flushes
    /// and gives the sink back.
    pub fn finish(mut self) -> io::Result<W> {
        self.idle()?;
        self.buf.push(OP_EOF);
        self.flush_buf()?;
        let Summing { mut out, crc, .. } = self.sink;
        out.write_all(&crc.finalize().to_le_bytes())?;
        out.flush()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_has_magic_aux_and_checksum() {
        let mut h = Header::now("7.0.15", 1000);
        h.repl = Some(ReplInfo { id: "a".repeat(40), offset: 77, stream_db: 0 });
        let mut w = RdbWriter::start(Vec::new(), &h).unwrap();
        w.select_db(0, 1, 1).unwrap();
        w.key(b"k", &Value::String(b"v".to_vec()), 123).unwrap();
        let out = w.finish().unwrap();
        assert_eq!(&out[..9], b"REDIS0010");
        let body = &out[..out.len() - 8];
        assert_eq!(out[out.len() - 9], OP_EOF);
        assert_eq!(CRC.checksum(body).to_le_bytes(), out[out.len() - 8..]);
        let text = String::from_utf8_lossy(&out);
        for f in ["redis-ver", "7.0.15", "redis-bits", "ctime", "used-mem", "repl-id", "repl-offset", "aof-base"] {
            assert!(text.contains(f), "{f}");
        }
    }

    #[test]
    fn a_collection_must_get_what_it_announced() {
        let mut w = RdbWriter::start(Vec::new(), &Header::now("7.0.15", 0)).unwrap();
        w.begin(Collection::Set, b"s", 2, 0).unwrap();
        w.item(b"a").unwrap();
        assert!(w.key(b"x", &Value::String(Vec::new()), 0).is_err(), "a key inside a collection");
        w.item(b"b").unwrap();
        assert!(w.item(b"c").is_err(), "one more than announced");
        w.begin(Collection::Hash, b"h", 1, 0).unwrap();
        assert!(w.finish().is_err(), "a collection left short");
    }
}
