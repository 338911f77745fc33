//! Hashes (Valkey's `t_hash.c`): a small hash keeps its fields packed in
//! its meta entry ([`crate::keyspace::packed`]); one that outgrows it
//! keeps each field under `H | klen | key | field`, for good. A hash
//! emptied is deleted (a `del` event).

use super::Txn;
use crate::keyspace::{member_key, member_prefix, packed, tag, KeyType, Meta, Pairs};
use crate::store::{StoreError, StoreResult};

fn corrupt(key: &[u8]) -> StoreError {
    StoreError(format!("corrupt packed hash '{}'", String::from_utf8_lossy(key)))
}

/// The fields of a packed body, owned.
fn unpack(key: &[u8], body: &[u8]) -> StoreResult<Pairs> {
    Ok(packed::decode(body).ok_or_else(|| corrupt(key))?.into_iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())
}

/// Where a hash's fields are, as a command that changes it sees them.
enum Fields {
    /// Packed in the meta (or a new hash): every field, sorted by name.
    Packed(Pairs),
    /// One engine entry per field.
    Entries,
}

/// A hash loaded to be changed; [`HashWrite::finish`] stages the result.
pub struct HashWrite {
    /// The meta as loaded (none: a new hash).
    old: Option<Meta>,
    fields: Fields,
    count: u64,
    changed: bool,
}

impl HashWrite {
    /// The hash at `key` whose meta (loaded for writing, of type hash) is
    /// `old`; none for a new hash, which starts packed.
    pub fn load(key: &[u8], old: Option<Meta>) -> StoreResult<HashWrite> {
        let fields = match &old {
            None => Fields::Packed(Vec::new()),
            Some(m) if m.packed => Fields::Packed(unpack(key, &m.body)?),
            Some(_) => Fields::Entries,
        };
        let count = old.as_ref().map(Meta::count).unwrap_or(0);
        Ok(HashWrite { old, fields, count, changed: false })
    }

    /// Whether the hash existed when loaded.
    pub fn exists(&self) -> bool {
        self.old.is_some()
    }

    /// The value of field `f`.
    pub fn get(&self, txn: &mut Txn<'_>, key: &[u8], f: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        Ok(match &self.fields {
            Fields::Packed(pairs) => pairs
                .binary_search_by(|(pf, _)| pf.as_slice().cmp(f))
                .ok()
                .and_then(|i| pairs.get(i))
                .map(|(_, v)| v.clone()),
            Fields::Entries => txn.get(&member_key(tag::HASH, key, f))?,
        })
    }

    /// Sets `f = v`; returns whether the field is new. `known` is what the
    /// caller already read of the field's presence (saves a second read).
    pub fn set(
        &mut self,
        txn: &mut Txn<'_>,
        key: &[u8],
        f: &[u8],
        v: Vec<u8>,
        known: Option<bool>,
    ) -> StoreResult<bool> {
        self.changed = true;
        let new = match &mut self.fields {
            Fields::Packed(pairs) => match pairs.binary_search_by(|(pf, _)| pf.as_slice().cmp(f)) {
                Ok(i) => {
                    if let Some(slot) = pairs.get_mut(i) {
                        slot.1 = v;
                    }
                    false
                }
                Err(i) => {
                    pairs.insert(i, (f.to_vec(), v));
                    true
                }
            },
            Fields::Entries => {
                let fk = member_key(tag::HASH, key, f);
                let existed = match known {
                    Some(e) => e,
                    None => txn.get(&fk)?.is_some(),
                };
                txn.put(fk, v);
                !existed
            }
        };
        if new {
            self.count += 1;
        }
        Ok(new)
    }

    /// Removes `f`; returns whether it was there.
    pub fn del(&mut self, txn: &mut Txn<'_>, key: &[u8], f: &[u8]) -> StoreResult<bool> {
        let gone = match &mut self.fields {
            Fields::Packed(pairs) => match pairs.binary_search_by(|(pf, _)| pf.as_slice().cmp(f)) {
                Ok(i) => {
                    pairs.remove(i);
                    true
                }
                Err(_) => false,
            },
            Fields::Entries => {
                let fk = member_key(tag::HASH, key, f);
                let there = txn.get(&fk)?.is_some();
                if there {
                    txn.delete(fk);
                }
                there
            }
        };
        if gone {
            self.changed = true;
            self.count = self.count.saturating_sub(1);
        }
        Ok(gone)
    }

    /// Stages the changed hash: packed while it fits, moved to one entry
    /// per field (for good) once it does not, dropped when empty.
    pub fn finish(self, txn: &mut Txn<'_>, key: &[u8]) {
        if !self.changed {
            return;
        }
        let expire_ms = self.old.as_ref().map(|m| m.expire_ms).unwrap_or(0);
        match self.fields {
            Fields::Packed(pairs) if pairs.is_empty() => {
                if let Some(o) = &self.old {
                    txn.drop_meta(key, o);
                }
            }
            Fields::Packed(pairs) if packed::fits(&pairs) => {
                txn.put_meta(key, self.old.as_ref(), &Meta::packed_hash(&pairs, expire_ms));
            }
            Fields::Packed(pairs) => {
                let n = pairs.len() as u64;
                for (f, v) in pairs {
                    txn.put(member_key(tag::HASH, key, &f), v);
                }
                txn.put_meta(key, self.old.as_ref(), &Meta::collection(KeyType::Hash, n, expire_ms));
            }
            Fields::Entries => {
                if let Some(o) = &self.old {
                    txn.put_count(key, Some(o), o.clone(), self.count);
                }
            }
        }
    }
}

/// Sets the `field, value` pairs of `pairs` in the hash at `key` (meta
/// `old`, loaded for writing; none for a new hash, which this creates);
/// returns how many fields were new. With `only_new`, existing fields are
/// left alone.
pub fn set_fields<P: AsRef<[u8]>>(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: Option<Meta>,
    pairs: &[P],
    only_new: bool,
) -> StoreResult<u64> {
    let mut h = HashWrite::load(key, old)?;
    let mut added = 0;
    for pair in pairs.chunks(2) {
        let [f, v] = pair else { continue };
        let (f, v) = (f.as_ref(), v.as_ref());
        let known = if only_new {
            if h.get(txn, key, f)?.is_some() {
                continue;
            }
            Some(false)
        } else {
            None
        };
        if h.set(txn, key, f, v.to_vec(), known)? {
            added += 1;
        }
    }
    h.finish(txn, key);
    Ok(added)
}

/// Removes `fields` from the hash at `key` (meta `old`, loaded for
/// writing), deleting it when none is left; returns how many were there.
pub fn delete_fields<F: AsRef<[u8]>>(
    txn: &mut Txn<'_>,
    key: &[u8],
    old: Meta,
    fields: impl IntoIterator<Item = F>,
) -> StoreResult<u64> {
    let mut h = HashWrite::load(key, Some(old))?;
    let mut removed = 0;
    for f in fields {
        if h.del(txn, key, f.as_ref())? {
            removed += 1;
        }
    }
    h.finish(txn, key);
    Ok(removed)
}

/// A hash as a read-only command sees it.
pub enum HashRead {
    /// No such key (or expired).
    Missing,
    /// Fields packed in this meta body.
    Packed(Meta),
    /// One engine entry per field.
    Entries,
}

impl HashRead {
    /// The hash whose meta (loaded for reading, of type hash) is `meta`.
    pub fn new(meta: Option<Meta>) -> HashRead {
        match meta {
            None => HashRead::Missing,
            Some(m) if m.packed => HashRead::Packed(m),
            Some(_) => HashRead::Entries,
        }
    }

    /// The value of field `f` of this hash at `key`.
    pub fn field(&self, txn: &mut Txn<'_>, key: &[u8], f: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        match self {
            HashRead::Missing => Ok(None),
            HashRead::Packed(m) => Ok(packed::find(&m.body, f).map_err(|()| corrupt(key))?.map(<[u8]>::to_vec)),
            HashRead::Entries => txn.get(&member_key(tag::HASH, key, f)),
        }
    }

    /// Every (field, value) of this hash at `key`, in field order.
    pub fn all(self, txn: &mut Txn<'_>, key: &[u8]) -> StoreResult<Pairs> {
        match self {
            HashRead::Missing => Ok(Vec::new()),
            HashRead::Packed(m) => unpack(key, &m.body),
            HashRead::Entries => {
                let prefix = member_prefix(tag::HASH, key);
                let n = prefix.len();
                Ok(txn
                    .scan_prefix(&prefix)?
                    .into_iter()
                    .map(|(k, v)| (k.get(n..).unwrap_or_default().to_vec(), v))
                    .collect())
            }
        }
    }
}
