//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE` as Redis 7.0 computes them, so
//! a strata server's digest equals a Redis server's holding the same data
//! (a replica can be compared with its primary, whichever each one is).
//!
//! Redis's scheme: a key's digest starts at twenty zero bytes; "mixing" a
//! string in XORs its SHA-1 into the digest and then replaces the digest
//! by its own SHA-1 (order matters); "adding" a string XORs its SHA-1 in
//! (order does not). A key mixes its name, its type as a big-endian u32,
//! then its value: a string mixed in, a list's elements mixed in order, a
//! set's members added, each hash field and each sorted-set member added
//! as the digest of (field, value) or (member, score as `%.17g`) mixed
//! from zero; an expiry adds `!!expire!!` (not its time). The dataset's
//! digest mixes in each non-empty database's number (big-endian u32) and
//! adds the digest of every key in it (`DIGEST-VALUE` answers a key's
//! digest without its name, as it is).

use std::io;

use super::image::{visit_database, visit_key, ImageError, ImageOptions, KeySink};
use super::write::Collection;
use super::Value;
use crate::store::{Batch, SnapshotView};

/// Twenty bytes, a SHA-1's size.
type Sum = [u8; 20];

fn sha1(data: &[u8]) -> Sum {
    sha1_smol::Sha1::from(data).digest().bytes()
}

/// Redis's `xorDigest`: adds `data` (order-independent).
fn add(digest: &mut Sum, data: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(data)) {
        *d ^= h;
    }
}

/// Redis's `mixDigest`: mixes `data` in (order-dependent).
fn mix(digest: &mut Sum, data: &[u8]) {
    add(digest, data);
    *digest = sha1(digest.as_slice());
}

/// Redis's type numbers (`OBJ_STRING` ...).
fn type_code(kind: Collection) -> u32 {
    match kind {
        Collection::List => 1,
        Collection::Set => 2,
        Collection::ZSet => 3,
        Collection::Hash => 4,
    }
}

/// `score` as C's `printf("%.17g")`: 17 significant digits, trailing
/// zeros dropped, exponent form below 1e-4 and from 1e17.
pub fn format_17g(score: f64) -> String {
    if score.is_nan() {
        return "nan".into();
    }
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{score:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..17).contains(&exp) {
        let decimals = usize::try_from(16 - exp).unwrap_or(0);
        trim(&format!("{score:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.unsigned_abs())
    }
}

/// A sink that digests the keys put into it.
struct Digest {
    /// The dataset's digest so far.
    total: Sum,
    /// The current key's digest.
    key: Sum,
    /// The current collection's kind.
    kind: Option<Collection>,
    /// Whether the current key expires.
    expires: bool,
    /// Whether a key mixes in its name (`DIGEST`; not `DIGEST-VALUE`).
    with_name: bool,
    /// A database number to mix in before its first key.
    pending_db: Option<u32>,
}

impl Digest {
    fn new(with_name: bool) -> Digest {
        Digest { total: [0; 20], key: [0; 20], kind: None, expires: false, with_name, pending_db: None }
    }

    fn start(&mut self, key: &[u8], code: u32, expire_ms: u64) {
        if let Some(db) = self.pending_db.take() {
            mix(&mut self.total, &db.to_be_bytes());
        }
        self.key = [0; 20];
        if self.with_name {
            mix(&mut self.key, key);
        }
        mix(&mut self.key, &code.to_be_bytes());
        self.expires = expire_ms != 0;
    }

    fn finish(&mut self) {
        if self.expires {
            add(&mut self.key, b"!!expire!!");
        }
        if self.with_name {
            let key = self.key;
            add(&mut self.total, &key);
        } else {
            self.total = self.key;
        }
        self.kind = None;
    }

    fn hex(&self) -> String {
        self.total.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The digest of an element made of two parts, added to the key's.
fn add_element(key: &mut Sum, first: &[u8], second: &[u8]) {
    let mut element = [0u8; 20];
    mix(&mut element, first);
    mix(&mut element, second);
    add(key, &element);
}

impl KeySink for Digest {
    fn key(&mut self, key: &[u8], value: &Value, expire_ms: u64) -> io::Result<()> {
        match value {
            Value::String(s) => {
                self.start(key, 0, expire_ms);
                mix(&mut self.key, s);
                self.finish();
                Ok(())
            }
            // A walk gives collections member by member; a whole value
            // is not expected here.
            _ => Err(io::Error::other("a collection given whole to the digest")),
        }
    }

    fn begin(&mut self, kind: Collection, key: &[u8], _: u64, expire_ms: u64) -> io::Result<()> {
        self.start(key, type_code(kind), expire_ms);
        self.kind = Some(kind);
        Ok(())
    }

    fn item(&mut self, item: &[u8]) -> io::Result<()> {
        match self.kind {
            Some(Collection::List) => mix(&mut self.key, item),
            _ => add(&mut self.key, item),
        }
        Ok(())
    }

    fn pair(&mut self, field: &[u8], value: &[u8]) -> io::Result<()> {
        add_element(&mut self.key, field, value);
        Ok(())
    }

    fn scored(&mut self, member: &[u8], score: f64) -> io::Result<()> {
        add_element(&mut self.key, member, format_17g(score).as_bytes());
        Ok(())
    }

    fn end(&mut self) -> io::Result<()> {
        self.finish();
        Ok(())
    }
}

/// `DEBUG DIGEST` of `views` (element i is database i), as 40 hex digits:
/// all zeros for an empty dataset. Keys already expired but not yet
/// removed count, as they do in Redis.
pub fn dataset_digest(views: &[Box<dyn SnapshotView>]) -> Result<String, ImageError> {
    let mut d = Digest::new(true);
    let opts = ImageOptions { now_ms: 0, ..ImageOptions::default() };
    for (db, view) in views.iter().enumerate() {
        d.pending_db = Some(u32::try_from(db).unwrap_or(u32::MAX));
        visit_database(&mut d, view.as_ref(), &opts)?;
    }
    Ok(d.hex())
}

/// `DEBUG DIGEST-VALUE`'s digest of `key` in `view` (its value and
/// expiry, not its name); all zeros if there is no such key.
pub fn value_digest(view: &dyn SnapshotView, key: &[u8]) -> Result<String, ImageError> {
    let mut d = Digest::new(false);
    visit_key(&mut d, view, key, Batch::new(256, 1 << 20))?;
    Ok(d.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_scores_as_printf_17g() {
        for (x, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (-3.0, "-3"),
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (1.5e17, "1.5e+17"),
            (12345678901234567.0, "12345678901234568"),
            (2.5e-7, "2.4999999999999999e-07"),
            (0.0001, "0.0001"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_17g(x), want, "{x}");
        }
    }

    #[test]
    fn unordered_members_digest_alike_and_lists_do_not() {
        let digest = |kind: Collection, items: &[&[u8]]| {
            let mut d = Digest::new(true);
            d.begin(kind, b"k", items.len() as u64, 0).unwrap();
            for i in items {
                d.item(i).unwrap();
            }
            d.end().unwrap();
            d.hex()
        };
        assert_eq!(digest(Collection::Set, &[b"a", b"b"]), digest(Collection::Set, &[b"b", b"a"]));
        assert_ne!(digest(Collection::List, &[b"a", b"b"]), digest(Collection::List, &[b"b", b"a"]));
        assert_ne!(digest(Collection::Set, &[b"a", b"b"]), digest(Collection::List, &[b"a", b"b"]));
    }

    #[test]
    fn an_expiry_counts_but_not_its_time() {
        let digest = |exp: u64| {
            let mut d = Digest::new(true);
            d.key(b"k", &Value::String(b"v".to_vec()), exp).unwrap();
            d.hex()
        };
        assert_eq!(digest(5), digest(99));
        assert_ne!(digest(0), digest(5));
        assert_eq!(Digest::new(true).hex(), "0".repeat(40));
    }
}
