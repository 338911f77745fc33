//! How a search step is decided without loading the next node.
//!
//! Each link carries, beside the index of the node it leads to, a 32-bit
//! *distinction tag*: where the target's user key first differs from the
//! user key of the node holding the link (their longest common prefix `d`),
//! and the target's next two bytes from there. A search keeps, for the node
//! it stands on, the common prefix `e` of that node's user key with the
//! probe's. Then a step compares two numbers: if `e > d` the probe agrees
//! with the node where the target leaves it upwards, so the target is
//! larger; if `e < d` the target agrees with the node where the probe leaves
//! it upwards, so the target is smaller, and shares `e` bytes with the
//! probe. Only when `e == d` are the two bytes looked at, and only when they
//! tie too is the target's key loaded.
//!
//! A plain key prefix in the link (what this replaced) decides nothing
//! among keys that share their first bytes: the members of one set or hash
//! (`S | klen | key | member`) or numeric keys (`0000001234`), where every
//! step loaded a node and compared its long shared prefix. Tags decide
//! steps at the point where the keys actually part.
//!
//! Keys are compared as user keys first (a shorter key that is a prefix of
//! a longer one sorts first), then by trailer; the tag covers the user key
//! only, so versions of one user key always fall back to a full compare.

/// A node the search stands on (its key is smaller than the probe's, or it
/// is the head) and the length of the common prefix of its user key with
/// the probe's user key (0 for the head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    /// Node index.
    pub node: u32,
    /// Common prefix of the node's user key with the probe's.
    pub lcp: u32,
}

impl Pos {
    /// The head of the list, where every search starts.
    pub const HEAD: Pos = Pos { node: super::HEAD, lcp: 0 };
}

/// Bits of the tag holding `d`; a `d` at or above `D_SAT` is stored as
/// `D_SAT` ("at least"), and such steps are decided by comparing keys.
const D_BITS: u32 = 14;
const D_SAT: u32 = (1 << D_BITS) - 1;

/// The tag of a link from a node whose user key shares `d` bytes with
/// `target` (the user key of the node linked to).
pub(crate) fn tag(d: usize, target: &[u8]) -> u32 {
    let d32 = u32::try_from(d).unwrap_or(D_SAT).min(D_SAT);
    if d32 == D_SAT {
        return D_SAT << 18;
    }
    let rest = target.get(d..).unwrap_or(&[]);
    let count = rest.len().min(2) as u32;
    let c0 = u32::from(rest.first().copied().unwrap_or(0));
    let c1 = u32::from(rest.get(1).copied().unwrap_or(0));
    d32 << 18 | count << 16 | c0 << 8 | c1
}

/// What a tag says about the node a link leads to, against the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The target's key is smaller than the probe's; its user key shares
    /// this many bytes with the probe's.
    Below(u32),
    /// The target's key is larger than the probe's.
    Above,
    /// Undecided: compare the keys; their user keys agree on at least this
    /// many leading bytes.
    Compare(u32),
}

/// Decides a step from the node at `e` (its common prefix with the probe)
/// along a link tagged `t`, for a probe whose user key is `up`.
pub(crate) fn decide(t: u32, e: u32, up: &[u8]) -> Step {
    let d = t >> 18;
    if d == D_SAT {
        // The node and the target share at least D_SAT bytes.
        return if e < D_SAT { Step::Below(e) } else { Step::Compare(D_SAT) };
    }
    if e > d {
        return Step::Above;
    }
    if e < d {
        return Step::Below(e);
    }
    let cn = ((t >> 16) & 3) as usize;
    let c = [(t >> 8) as u8, t as u8];
    let rest = up.get(d as usize..).unwrap_or(&[]);
    let pn = rest.len().min(2);
    for j in 0..pn.min(cn) {
        let (p, q) = (rest.get(j).copied().unwrap_or(0), c.get(j).copied().unwrap_or(0));
        if p != q {
            return if p < q { Step::Above } else { Step::Below(d + j as u32) };
        }
    }
    match pn.cmp(&cn) {
        // Both go on past the two bytes, or both end here (one user key).
        std::cmp::Ordering::Equal => Step::Compare(d),
        // The probe's user key ends inside the target's: it sorts first.
        std::cmp::Ordering::Less => Step::Above,
        // The target's user key ends inside the probe's.
        std::cmp::Ordering::Greater => Step::Below(d + cn as u32),
    }
}

/// Whether the tag `t` of a link from a node at common prefix `e` with the
/// probe is also the tag of a link from the probe to the same target (so a
/// new node linked in front of the target can reuse it without loading the
/// target's key): true when the probe parts from the target exactly where
/// the node does.
pub(crate) fn tag_carries_over(t: u32, e: u32, up: &[u8]) -> bool {
    let d = t >> 18;
    if d == D_SAT {
        return false;
    }
    if e > d {
        return true;
    }
    e == d && ((t >> 16) & 3) > 0 && up.get(d as usize).is_some_and(|&b| b != (t >> 8) as u8)
}

/// Length of the common prefix of two byte strings.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut i = 0;
    // Eight bytes at a time: keys of one record share long prefixes.
    while let (Some(x), Some(y)) = (a.get(i..i + 8), b.get(i..i + 8)) {
        let (x, y) =
            (u64::from_be_bytes(x.try_into().unwrap_or([0; 8])), u64::from_be_bytes(y.try_into().unwrap_or([0; 8])));
        if x != y {
            return i + ((x ^ y).leading_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a.get(i..).unwrap_or(&[]).iter().zip(b.get(i..).unwrap_or(&[])).take_while(|(x, y)| x == y).count()
}

/// The common prefix of a node's user key with probe `b`, given the node's
/// common prefix `e` with probe `a` and `f`, the common prefix of `a` and
/// `b`: `min(e, f)` when they differ; `None` when they are equal (the node
/// may share more with `b`; its key must be read).
pub(crate) fn rebased(e: u32, f: u32) -> Option<u32> {
    (e != f).then_some(e.min(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::cmp::Ordering;

    /// Keys from a small alphabet with shared prefixes and prefix
    /// relations, so every case of `decide` comes up.
    fn key(rng: &mut rand::rngs::StdRng) -> Vec<u8> {
        let mut k = b"S\0\0\0\x05myset".to_vec();
        k.truncate(rng.gen_range(0..=k.len()));
        for _ in 0..rng.gen_range(0..5) {
            k.push([0u8, 1, b'a', 0xff][rng.gen_range(0..4)]);
        }
        k
    }

    #[test]
    fn decide_agrees_with_comparing_the_keys() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (mut decided, mut seen) = (0, 0);
        for _ in 0..200_000 {
            let (mut x, mut y, p) = (key(&mut rng), key(&mut rng), key(&mut rng));
            if x > y {
                std::mem::swap(&mut x, &mut y);
            }
            // The search only stands on nodes below the probe; the head is
            // the empty key.
            if x > p || (x == p && rng.gen_bool(0.5)) {
                continue;
            }
            seen += 1;
            let e = common_prefix(&x, &p) as u32;
            let t = tag(common_prefix(&x, &y), &y);
            match decide(t, e, &p) {
                Step::Below(l) => {
                    assert_eq!(y.cmp(&p), Ordering::Less, "{x:?} {y:?} {p:?}");
                    assert_eq!(l as usize, common_prefix(&y, &p));
                    decided += 1;
                }
                Step::Above => {
                    assert_eq!(y.cmp(&p), Ordering::Greater, "{x:?} {y:?} {p:?}");
                    decided += 1;
                }
                Step::Compare(from) => {
                    assert!(common_prefix(&y, &p) >= from as usize);
                }
            }
            if tag_carries_over(t, e, &p) {
                assert_eq!(tag(common_prefix(&p, &y), &y), t, "{x:?} {y:?} {p:?}");
            }
        }
        // Most steps are decided without the target's key, even on keys
        // this alike (short, a four-letter alphabet, many equal).
        assert!(decided * 3 > seen * 2, "{decided} of {seen}");
    }

    #[test]
    fn long_shared_prefixes_saturate_and_still_decide() {
        let base = vec![7u8; 20_000];
        let (mut x, mut y, mut p) = (base.clone(), base.clone(), base.clone());
        x.push(1);
        y.push(5);
        p.push(3);
        let t = tag(common_prefix(&x, &y), &y);
        assert_eq!(decide(t, common_prefix(&x, &p) as u32, &p), Step::Compare(D_SAT));
        // A probe that parts from the node early is decided by the numbers.
        let q = vec![7u8, 9];
        assert_eq!(decide(t, 1, &q), Step::Below(1));
    }

    #[test]
    fn rebased_prefixes_match_when_known() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..50_000 {
            let (n, a, b) = (key(&mut rng), key(&mut rng), key(&mut rng));
            let (e, f) = (common_prefix(&n, &a) as u32, common_prefix(&a, &b) as u32);
            if let Some(l) = rebased(e, f) {
                assert_eq!(l as usize, common_prefix(&n, &b));
            }
        }
        assert_eq!(common_prefix(b"0123456789abcdefX", b"0123456789abcdefY"), 16);
        assert_eq!(common_prefix(b"abc", b"abcd"), 3);
    }
}
