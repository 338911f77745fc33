//! Decoding one value in RDB object format (a type byte, then the value)
//! from an [`Input`]: a DUMP payload in memory (RESTORE) or an RDB stream
//! ([`super::read`]). Every read is bounds-checked, and every element
//! decoded is charged to a [`Budget`], so a small payload (compressed, or
//! integers packed in a few bits) cannot expand without limit.
//!
//! Encoded collections (listpacks, ziplists, intsets) are RDB strings: they
//! are read whole from the input, then decoded from memory ([`Blob`]).

use super::{
    Pairs, Refused, Value, MAX_LEN, T_HASH, T_HASH_LISTPACK, T_HASH_ZIPLIST, T_LIST, T_LIST_QUICKLIST,
    T_LIST_QUICKLIST_2, T_LIST_ZIPLIST, T_SET, T_SET_INTSET, T_SET_LISTPACK, T_STRING, T_ZSET, T_ZSET_2,
    T_ZSET_LISTPACK, T_ZSET_ZIPLIST,
};

/// Where a decoder reads its bytes.
pub(crate) trait Input {
    /// Fills `buf` with the next bytes.
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), Refused>;
    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<Vec<u8>, Refused>;
    /// How many bytes are left, if the input knows (a payload in memory);
    /// `None` for a stream.
    fn left(&self) -> Option<usize>;
}

/// A payload in memory.
pub(crate) struct SliceInput<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> SliceInput<'a> {
    /// Reads `buf` from its start.
    pub(crate) fn new(buf: &'a [u8]) -> SliceInput<'a> {
        SliceInput { buf, pos: 0 }
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Refused> {
        let end = self.pos.checked_add(n).ok_or(Refused::BadFormat)?;
        let b = self.buf.get(self.pos..end).ok_or(Refused::BadFormat)?;
        self.pos = end;
        Ok(b)
    }
}

impl Input for SliceInput<'_> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), Refused> {
        buf.copy_from_slice(self.bytes(buf.len())?);
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<Vec<u8>, Refused> {
        Ok(self.bytes(n)?.to_vec())
    }

    fn left(&self) -> Option<usize> {
        Some(self.buf.len().saturating_sub(self.pos))
    }
}

/// What one value may decode: each element costs its bytes plus
/// `entry_cost`, taken from `left`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// What is left to decode.
    pub left: u64,
    /// What an element costs beyond its bytes.
    pub entry_cost: u64,
}

impl Budget {
    /// Charges one element of `len` bytes.
    fn charge(&mut self, len: usize) -> Result<(), Refused> {
        let cost = (len as u64).saturating_add(self.entry_cost);
        self.left = self.left.checked_sub(cost).ok_or(Refused::TooLarge)?;
        Ok(())
    }
}

/// An RDB length, or one of the special string encodings.
pub(crate) enum Len {
    /// A length.
    Plain(u64),
    /// A special encoding (integer, LZF).
    Special(u8),
}

/// Decodes values from an input on a budget.
pub(crate) struct Decoder<'a, I: Input + ?Sized> {
    /// Where the bytes come from.
    pub input: &'a mut I,
    /// What is left to decode.
    pub budget: &'a mut Budget,
}

impl<I: Input + ?Sized> Decoder<'_, I> {
    /// A reader of `buf` (a blob of this value) on the same budget.
    fn blob<'b>(&'b mut self, buf: &'b [u8]) -> Blob<'b> {
        Blob { buf, pos: 0, budget: self.budget }
    }

    /// Charges one element of `len` bytes.
    fn charge(&mut self, len: usize) -> Result<(), Refused> {
        self.budget.charge(len)
    }

    /// One byte.
    pub(crate) fn byte(&mut self) -> Result<u8, Refused> {
        let [b] = self.array()?;
        Ok(b)
    }

    /// `N` bytes.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Refused> {
        let mut a = [0u8; N];
        self.input.fill(&mut a)?;
        Ok(a)
    }

    /// A length or a special string encoding.
    pub(crate) fn len_or_special(&mut self) -> Result<Len, Refused> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Plain(u64::from(b & 0x3f)),
            1 => Len::Plain(u64::from(b & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if b == 0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
            2 if b == 0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
            3 => Len::Special(b & 0x3f),
            _ => return Err(Refused::BadFormat),
        })
    }

    /// A count of elements. In a payload each takes at least a byte, so one
    /// past what is left is a damaged payload; in a stream each costs at
    /// least the budget's entry cost, so one past what the budget allows
    /// is too large.
    fn count(&mut self) -> Result<usize, Refused> {
        match (self.len_or_special()?, self.input.left()) {
            (Len::Plain(n), Some(left)) if n <= left as u64 => Ok(n as usize),
            (Len::Plain(n), None) if n <= self.budget.left / self.budget.entry_cost.max(1) => {
                usize::try_from(n).map_err(|_| Refused::TooLarge)
            }
            (Len::Plain(_), None) => Err(Refused::TooLarge),
            _ => Err(Refused::BadFormat),
        }
    }

    /// A length (no special encoding allowed) of at most [`MAX_LEN`].
    pub(crate) fn len(&mut self) -> Result<usize, Refused> {
        match self.len_or_special()? {
            Len::Plain(n) if n <= MAX_LEN => usize::try_from(n).map_err(|_| Refused::BadFormat),
            Len::Plain(_) => Err(Refused::TooLarge),
            _ => Err(Refused::BadFormat),
        }
    }

    /// A length of any size (no special encoding allowed).
    pub(crate) fn plain_len(&mut self) -> Result<u64, Refused> {
        match self.len_or_special()? {
            Len::Plain(n) => Ok(n),
            Len::Special(_) => Err(Refused::BadFormat),
        }
    }

    /// An RDB string (an element, charged): plain, an integer (8, 16, 32
    /// bits) or LZF-compressed.
    pub(crate) fn string(&mut self) -> Result<Vec<u8>, Refused> {
        let s = self.raw_string()?;
        self.charge(s.len())?;
        Ok(s)
    }

    /// An RDB string that holds an encoded collection (its elements are
    /// charged as they are decoded).
    pub(crate) fn raw_string(&mut self) -> Result<Vec<u8>, Refused> {
        match self.len_or_special()? {
            Len::Plain(n) if n > MAX_LEN => Err(Refused::TooLarge),
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Refused::BadFormat)?;
                self.input.take(n)
            }
            Len::Special(0) => Ok(i64::from(self.byte()? as i8).to_string().into_bytes()),
            Len::Special(1) => Ok(i64::from(i16::from_le_bytes(self.array()?)).to_string().into_bytes()),
            Len::Special(2) => Ok(i64::from(i32::from_le_bytes(self.array()?)).to_string().into_bytes()),
            Len::Special(3) => {
                let (clen, len) = (self.len()?, self.len()?);
                if len == 0 {
                    return Err(Refused::BadFormat);
                }
                // Charged before it is inflated (LZF expands up to 88x).
                self.charge(len)?;
                let packed = self.input.take(clen)?;
                let out = lzf::decompress(&packed, len).map_err(|_| Refused::BadFormat)?;
                if out.len() != len {
                    return Err(Refused::BadFormat);
                }
                Ok(out)
            }
            Len::Special(_) => Err(Refused::BadFormat),
        }
    }

    /// The old sorted-set score: a length byte and its text (253 NaN,
    /// 254 +inf, 255 -inf).
    fn text_double(&mut self) -> Result<f64, Refused> {
        match self.byte()? {
            253 => Err(Refused::BadFormat),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_score(&self.input.take(usize::from(n))?),
        }
    }

    fn strings(&mut self) -> Result<Vec<Vec<u8>>, Refused> {
        let n = self.count()?;
        (0..n).map(|_| self.string()).collect()
    }

    /// A type byte and the value of that type.
    pub(crate) fn object(&mut self) -> Result<Value, Refused> {
        let kind = self.byte()?;
        self.object_of(kind)
    }

    /// The value of type `kind` (its type byte already read).
    pub(crate) fn object_of(&mut self, kind: u8) -> Result<Value, Refused> {
        Ok(match kind {
            T_STRING => Value::String(self.string()?),
            T_LIST => Value::List(self.strings()?),
            T_SET => Value::Set(self.strings()?),
            T_HASH => {
                let n = self.count()?;
                Value::Hash((0..n).map(|_| Ok((self.string()?, self.string()?))).collect::<Result<_, _>>()?)
            }
            T_ZSET | T_ZSET_2 => {
                let n = self.count()?;
                let mut members = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    let m = self.string()?;
                    let score = if kind == T_ZSET_2 { f64::from_le_bytes(self.array()?) } else { self.text_double()? };
                    if score.is_nan() {
                        return Err(Refused::BadFormat);
                    }
                    members.push((m, score));
                }
                Value::ZSet(members)
            }
            T_SET_INTSET => {
                let blob = self.raw_string()?;
                Value::Set(intset(&mut self.blob(&blob))?)
            }
            T_SET_LISTPACK => {
                let blob = self.raw_string()?;
                Value::Set(listpack(&mut self.blob(&blob))?)
            }
            T_HASH_LISTPACK => {
                let blob = self.raw_string()?;
                Value::Hash(pairs(listpack(&mut self.blob(&blob))?)?)
            }
            T_HASH_ZIPLIST => {
                let blob = self.raw_string()?;
                Value::Hash(pairs(ziplist(&mut self.blob(&blob))?)?)
            }
            T_ZSET_LISTPACK => {
                let blob = self.raw_string()?;
                Value::ZSet(scored(listpack(&mut self.blob(&blob))?)?)
            }
            T_ZSET_ZIPLIST => {
                let blob = self.raw_string()?;
                Value::ZSet(scored(ziplist(&mut self.blob(&blob))?)?)
            }
            T_LIST_ZIPLIST => {
                let blob = self.raw_string()?;
                Value::List(ziplist(&mut self.blob(&blob))?)
            }
            T_LIST_QUICKLIST => {
                let n = self.count()?;
                let mut items = Vec::new();
                for _ in 0..n {
                    let blob = self.raw_string()?;
                    items.extend(ziplist(&mut self.blob(&blob))?);
                }
                Value::List(items)
            }
            T_LIST_QUICKLIST_2 => {
                let n = self.count()?;
                let mut items = Vec::new();
                for _ in 0..n {
                    match self.len()? {
                        // A plain node holds one large element as it is.
                        1 => items.push(self.string()?),
                        2 => {
                            let blob = self.raw_string()?;
                            items.extend(listpack(&mut self.blob(&blob))?);
                        }
                        _ => return Err(Refused::BadFormat),
                    }
                }
                Value::List(items)
            }
            _ => return Err(Refused::BadFormat),
        })
    }
}

/// A blob of one value in memory (a listpack, ziplist or intset), on the
/// value's budget.
struct Blob<'a> {
    buf: &'a [u8],
    pos: usize,
    budget: &'a mut Budget,
}

impl Blob<'_> {
    fn charge(&mut self, len: usize) -> Result<(), Refused> {
        self.budget.charge(len)
    }

    fn bytes(&mut self, n: usize) -> Result<&[u8], Refused> {
        let end = self.pos.checked_add(n).ok_or(Refused::BadFormat)?;
        let b = self.buf.get(self.pos..end).ok_or(Refused::BadFormat)?;
        self.pos = end;
        Ok(b)
    }

    fn byte(&mut self) -> Result<u8, Refused> {
        Ok(*self.bytes(1)?.first().ok_or(Refused::BadFormat)?)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Refused> {
        self.bytes(N)?.try_into().map_err(|_| Refused::BadFormat)
    }
}

fn parse_score(text: &[u8]) -> Result<f64, Refused> {
    match crate::numbers::parse_f64(text) {
        Some(d) if !d.is_nan() => Ok(d),
        _ => Err(Refused::BadFormat),
    }
}

/// Alternating elements as (field, value) pairs.
fn pairs(items: Vec<Vec<u8>>) -> Result<Pairs, Refused> {
    if !items.len().is_multiple_of(2) {
        return Err(Refused::BadFormat);
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        out.push((f, v));
    }
    Ok(out)
}

/// Alternating elements as (member, score) pairs.
fn scored(items: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, f64)>, Refused> {
    pairs(items)?.into_iter().map(|(m, s)| Ok((m, parse_score(&s)?))).collect()
}

/// The members of an intset: encoding (2, 4 or 8 bytes), count, values.
fn intset(r: &mut Blob<'_>) -> Result<Vec<Vec<u8>>, Refused> {
    let blob_len = r.buf.len();
    let width = u32::from_le_bytes(r.array()?) as usize;
    let n = u32::from_le_bytes(r.array()?) as usize;
    if !matches!(width, 2 | 4 | 8) || n.checked_mul(width) != Some(blob_len - 8) {
        return Err(Refused::BadFormat);
    }
    (0..n)
        .map(|_| {
            let v = match width {
                2 => i64::from(i16::from_le_bytes(r.array()?)),
                4 => i64::from(i32::from_le_bytes(r.array()?)),
                _ => i64::from_le_bytes(r.array()?),
            };
            let s = v.to_string().into_bytes();
            r.charge(s.len())?;
            Ok(s)
        })
        .collect()
}

/// Sign-extends the low `bits` bits of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The elements of a listpack (Redis 7): total bytes, count, entries each
/// followed by their length backwards, and an end byte.
fn listpack(r: &mut Blob<'_>) -> Result<Vec<Vec<u8>>, Refused> {
    let total = u32::from_le_bytes(r.array()?) as usize;
    let _count = u16::from_le_bytes(r.array()?);
    if total != r.buf.len() {
        return Err(Refused::BadFormat);
    }
    let mut out = Vec::new();
    loop {
        let start = r.pos;
        let b = r.byte()?;
        let item = if b == 0xff {
            break;
        } else if b & 0x80 == 0 {
            u64::from(b & 0x7f).to_string().into_bytes()
        } else if b & 0xc0 == 0x80 {
            r.bytes(usize::from(b & 0x3f))?.to_vec()
        } else if b & 0xe0 == 0xc0 {
            signed(u64::from(b & 0x1f) << 8 | u64::from(r.byte()?), 13).to_string().into_bytes()
        } else if b & 0xf0 == 0xe0 {
            let n = usize::from(b & 0x0f) << 8 | usize::from(r.byte()?);
            r.bytes(n)?.to_vec()
        } else {
            match b {
                0xf0 => {
                    let n = u32::from_le_bytes(r.array()?) as usize;
                    r.bytes(n)?.to_vec()
                }
                0xf1 => i64::from(i16::from_le_bytes(r.array()?)).to_string().into_bytes(),
                0xf2 => {
                    let [x, y, z] = r.array()?;
                    signed(u64::from(u32::from_le_bytes([x, y, z, 0])), 24).to_string().into_bytes()
                }
                0xf3 => i64::from(i32::from_le_bytes(r.array()?)).to_string().into_bytes(),
                0xf4 => i64::from_le_bytes(r.array()?).to_string().into_bytes(),
                _ => return Err(Refused::BadFormat),
            }
        };
        // The entry's length (encoding and data), written backwards in 1 to
        // 5 bytes of 7 bits each (the bounds of Redis's lpEncodeBacklen).
        let len = r.pos - start;
        let back = match len {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        r.bytes(back)?;
        r.charge(item.len())?;
        out.push(item);
    }
    if r.pos != r.buf.len() {
        return Err(Refused::BadFormat);
    }
    Ok(out)
}

/// The elements of a ziplist (Redis 6 and older): total bytes, offset of
/// the tail, count, entries each led by the previous entry's length, and
/// an end byte.
fn ziplist(r: &mut Blob<'_>) -> Result<Vec<Vec<u8>>, Refused> {
    let total = u32::from_le_bytes(r.array()?) as usize;
    let _tail = u32::from_le_bytes(r.array()?);
    let _count = u16::from_le_bytes(r.array()?);
    if total != r.buf.len() {
        return Err(Refused::BadFormat);
    }
    let mut out = Vec::new();
    loop {
        match r.byte()? {
            0xff => break,
            0xfe => {
                r.bytes(4)?;
            }
            _ => {}
        }
        let b = r.byte()?;
        let item = match b >> 6 {
            0 => r.bytes(usize::from(b & 0x3f))?.to_vec(),
            1 => {
                let n = usize::from(b & 0x3f) << 8 | usize::from(r.byte()?);
                r.bytes(n)?.to_vec()
            }
            2 => {
                let n = u32::from_be_bytes(r.array()?) as usize;
                r.bytes(n)?.to_vec()
            }
            _ => {
                let v = match b {
                    0xc0 => i64::from(i16::from_le_bytes(r.array()?)),
                    0xd0 => i64::from(i32::from_le_bytes(r.array()?)),
                    0xe0 => i64::from_le_bytes(r.array()?),
                    0xf0 => {
                        let [x, y, z] = r.array()?;
                        signed(u64::from(u32::from_le_bytes([x, y, z, 0])), 24)
                    }
                    0xfe => i64::from(r.byte()? as i8),
                    0xf1..=0xfd => i64::from(b & 0x0f) - 1,
                    _ => return Err(Refused::BadFormat),
                };
                v.to_string().into_bytes()
            }
        };
        r.charge(item.len())?;
        out.push(item);
    }
    if r.pos != r.buf.len() {
        return Err(Refused::BadFormat);
    }
    Ok(out)
}
