//! Strings (Valkey's `t_string.c`): the value lives inline in the key's
//! meta entry, after the type and expiry.

use super::Txn;
use crate::keyspace::Meta;
use crate::store::StoreResult;

/// Writes `value` with expiry `expire_ms` (0: none) as the string at
/// `key`, whose meta (a string's, loaded for writing) is `old`; none
/// creates the key.
pub fn write(txn: &mut Txn<'_>, key: &[u8], old: Option<&Meta>, value: Vec<u8>, expire_ms: u64) {
    txn.put_meta(key, old, &Meta::string(value, expire_ms));
}

/// Writes the string `value` at `key` over whatever it holds (meta `old`,
/// loaded for writing): a key of another type is removed first.
pub fn replace(txn: &mut Txn<'_>, key: &[u8], old: Option<Meta>, value: Vec<u8>, expire_ms: u64) -> StoreResult<()> {
    let new = Meta::string(value, expire_ms);
    match old {
        Some(o) if o.kind != new.kind => {
            txn.delete_key(key, &o)?;
            txn.put_meta(key, None, &new);
        }
        other => txn.put_meta(key, other.as_ref(), &new),
    }
    Ok(())
}

/// Sets the expiry of the string at `key` (meta `old`) to `at` (0: none);
/// a time already past deletes it (a `del` event). An unchanged expiry
/// writes nothing.
pub fn set_expiry(txn: &mut Txn<'_>, key: &[u8], old: &Meta, at: u64) -> StoreResult<()> {
    if txn.is_past(at) {
        txn.delete_key(key, old)?;
        txn.note("del", key);
    } else if at != old.expire_ms {
        txn.put_meta(key, Some(old), &Meta::string(old.body.clone(), at));
    }
    Ok(())
}
