//! Small hashes packed into their meta entry (FORMAT.md, "Server keyspace
//! encoding", type 6): `count u64 LE`, then every field as
//! `varint(len) | field | varint(len) | value`, in field order.
//!
//! Why: a hash written field by field costs one engine entry per field (a
//! log record, a memtable node, a matrix element each), and reading it
//! whole is a merge over every level. Packed, writing a YCSB record is one
//! entry and HGETALL one point read. A hash that outgrows
//! [`MAX_FIELDS`] or [`MAX_BYTES`] moves to one entry per field for good,
//! so a write to a big hash never rewrites all of it.

/// Most fields a packed hash holds.
pub const MAX_FIELDS: usize = 128;

/// Most bytes a packed hash's encoded fields take (beyond that a one-field
/// write would rewrite too much).
pub const MAX_BYTES: usize = 8 << 10;

/// Appends `n` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a varint at `*at`, advancing it; `None` if truncated or longer
/// than a u64.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        n |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

fn get_slice<'a>(b: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len = usize::try_from(get_varint(b, at)?).ok()?;
    let end = at.checked_add(len)?;
    let s = b.get(*at..end)?;
    *at = end;
    Some(s)
}

/// Bytes the fields take once encoded (the body without its count).
pub fn encoded_len<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(F, V)]) -> usize {
    pairs.iter().map(|(f, v)| f.as_ref().len() + v.as_ref().len() + 4).sum()
}

/// Whether these fields may stay packed.
pub fn fits<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(F, V)]) -> bool {
    pairs.len() <= MAX_FIELDS && encoded_len(pairs) <= MAX_BYTES
}

/// The body of a packed hash with `pairs` (sorted by field, no duplicates).
pub fn encode<F: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(F, V)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + encoded_len(pairs));
    out.extend_from_slice(&(pairs.len() as u64).to_le_bytes());
    for (f, v) in pairs {
        let (f, v) = (f.as_ref(), v.as_ref());
        put_varint(&mut out, f.len() as u64);
        out.extend_from_slice(f);
        put_varint(&mut out, v.len() as u64);
        out.extend_from_slice(v);
    }
    out
}

/// The (field, value) pairs of a packed body, borrowed from it; `None` if
/// malformed (truncated, a count that disagrees, or fields out of order).
pub fn decode(body: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let count = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let mut at = 8;
    // The count bounds the allocation only as far as the bytes could hold.
    let mut out = Vec::with_capacity((count as usize).min(body.len() / 2));
    while at < body.len() {
        let f = get_slice(body, &mut at)?;
        let v = get_slice(body, &mut at)?;
        if out.last().is_some_and(|(last, _): &(&[u8], &[u8])| *last >= f) {
            return None;
        }
        out.push((f, v));
    }
    (out.len() as u64 == count).then_some(out)
}

/// The value of `field` in a packed body (`Ok(None)`: no such field;
/// `Err(())`: malformed), without collecting the other fields.
#[allow(clippy::result_unit_err)]
pub fn find<'a>(body: &'a [u8], field: &[u8]) -> Result<Option<&'a [u8]>, ()> {
    let mut at = 8;
    if body.len() < 8 {
        return Err(());
    }
    while at < body.len() {
        let f = get_slice(body, &mut at).ok_or(())?;
        let v = get_slice(body, &mut at).ok_or(())?;
        match f.cmp(field) {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => return Ok(Some(v)),
            std::cmp::Ordering::Greater => return Ok(None),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varints_round_trip_at_their_edges() {
        for n in [0u64, 1, 127, 128, 255, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, n);
            let mut at = 0;
            assert_eq!(get_varint(&b, &mut at), Some(n));
            assert_eq!(at, b.len());
        }
        // Eleven continuation bytes overflow a u64.
        assert_eq!(get_varint(&[0xff; 11], &mut 0), None);
        assert_eq!(get_varint(&[0x80], &mut 0), None);
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let good = encode(&[(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
        assert!(decode(&good).is_some());
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_none(), "cut at {cut}");
        }
        let mut wrong_count = good.clone();
        wrong_count[0] = 3;
        assert!(decode(&wrong_count).is_none());
        let unsorted = encode(&[(b"b".to_vec(), b"1".to_vec()), (b"a".to_vec(), b"2".to_vec())]);
        assert!(decode(&unsorted).is_none());
        let mut long = good.clone();
        long[8] = 200; // field length past the end
        assert!(decode(&long).is_none());
        assert_eq!(find(&long, b"zz"), Err(()));
        assert_eq!(find(&[1, 2], b"a"), Err(()));
    }

    proptest! {
        #[test]
        fn packed_fields_round_trip(fields in proptest::collection::btree_map(
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..300),
            0..40,
        )) {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = fields.into_iter().collect();
            let body = encode(&pairs);
            prop_assert_eq!(body.len(), 8 + encoded_len(&pairs) - 4 * pairs.len()
                + pairs.iter().map(|(f, v)| varint_len(f.len()) + varint_len(v.len())).sum::<usize>());
            let back = decode(&body).expect("decodes");
            prop_assert_eq!(back.len(), pairs.len());
            for ((f, v), (bf, bv)) in pairs.iter().zip(&back) {
                prop_assert_eq!(&f[..], *bf);
                prop_assert_eq!(&v[..], *bv);
                prop_assert_eq!(find(&body, f), Ok(Some(&v[..])));
            }
            let mut missing = pairs.last().map(|(f, _)| f.clone()).unwrap_or_default();
            missing.push(0);
            prop_assert_eq!(find(&body, &missing), Ok(None));
        }
    }

    fn varint_len(n: usize) -> usize {
        let mut b = Vec::new();
        put_varint(&mut b, n as u64);
        b.len()
    }
}
