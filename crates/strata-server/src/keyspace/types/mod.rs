//! The data types (as Valkey's `t_*.c`): each owns its encoding in the
//! engine and its mutations, member count upkeep and the keyspace events
//! it notes where it mutates. They take the command's [`Txn`]; the
//! command handlers (`cmd/`) parse arguments, check the key's type and
//! shape replies.

pub mod hash;
pub mod list;
pub mod set;
pub mod string;
pub mod zset;

pub use super::Txn;

use super::{member_prefix, Meta};
use crate::store::StoreResult;

/// Every member entry (store key and value) of `key`, whose meta is
/// `meta`, whatever its type: none for a string or a packed hash.
pub fn member_entries(txn: &mut Txn<'_>, key: &[u8], meta: &Meta) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for &tag in meta.member_tags() {
        out.extend(txn.scan_prefix(&member_prefix(tag, key))?);
    }
    Ok(out)
}

/// The member entries of `src` (meta `meta`) as they are to be stored
/// under the key `dst` (RENAME, COPY, MOVE): the same members and values.
pub fn members_renamed(txn: &mut Txn<'_>, src: &[u8], meta: &Meta, dst: &[u8]) -> StoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for &tag in meta.member_tags() {
        let from = member_prefix(tag, src);
        let to = member_prefix(tag, dst);
        for (k, v) in txn.scan_prefix(&from)? {
            let mut nk = to.clone();
            nk.extend_from_slice(k.get(from.len()..).unwrap_or_default());
            out.push((nk, v));
        }
    }
    Ok(out)
}
