//! Tests of the PM skiplists: linking, zipper merges against a model
//! (equal keys, tombstones, snapshots' bound, braiding over 1, 2 and 4
//! regions), reaping, cursors both ways, and crash images of the simulated
//! PM at stores throughout a merge and a reap: each image, merged again
//! from the start, reaped and walked, holds exactly the model, and before
//! that redo every key reads right through the L0 list then L1.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_pmem::{Backing, Extent, Region, RegionOptions, SimPm};

use super::iter::ListIter;
use super::zipper::{all_shadowed, drop_shadowed, reap, zip};
use super::*;
use crate::batch::WriteBatch;
use crate::iterator::InternalIterator;
use crate::key::{trailer, ParsedKey, KIND_FOR_SEEK, MAX_SEQ};
use crate::log::{entry_len, write_entry, Towers, EXTENT_KIND_LOG, HEADER_LEN};

const LEN: u64 = 4 << 20;

fn opts() -> RegionOptions {
    RegionOptions { len: LEN, slot_bytes: 64 << 10, write_latency_ns: 0, create: true, expect_id: None }
}

/// One version: key index, sequence, value (None: tombstone).
type Version = (u32, u64, Option<Vec<u8>>);

fn key(k: u32) -> Vec<u8> {
    // Shared prefixes, as db_bench's keys have.
    format!("{:016}", k).into_bytes()
}

/// A region with a log extent holding `versions` as pm-only entries, and a
/// root extent; returns the nodes (in `versions` order) and both extents.
struct Setup {
    region: Region,
    sim: Arc<SimPm>,
    extents: Vec<Extent>,
    root: u64,
}

fn setup(versions: &[Version], regions: usize) -> (Setup, Vec<u64>) {
    let sim = Arc::new(SimPm::new(LEN as usize));
    let region = Region::open(Backing::Sim(sim.clone()), &opts()).unwrap().0;
    let root = region.allocate(4, 1, 1).unwrap();
    let root_ext = root.extent().clone();
    for i in 0..ListHead::block_bytes(regions) * 4 / 8 {
        root_ext.store_link(root_ext.offset() + 8 * i, 0).unwrap();
    }
    let mut log = region.allocate(EXTENT_KIND_LOG, 16, 7).unwrap();
    let mut nodes = Vec::new();
    for (k, seq, v) in versions {
        let mut b = WriteBatch::new();
        match v {
            Some(v) => b.put(key(*k), v),
            None => b.delete(key(*k)),
        };
        let towers = Towers::choose(1, regions);
        let mut slot = log.reserve(entry_len(towers.bytes() + b.rep().len())).unwrap();
        write_entry(&mut slot, 7, *seq, 1, b.rep(), Some(&towers)).unwrap();
        nodes.push(slot.offset() + HEADER_LEN as u64);
    }
    let extents = vec![root_ext.clone(), log.extent().clone()];
    (Setup { region, sim, extents, root: root_ext.offset() }, nodes)
}

fn space_of(s: &Setup) -> ListSpace {
    ListSpace::new(s.region.clone(), Arc::new(PathBuf::from("strata.pm")), s.extents.clone())
}

fn head(s: &Setup, block: u64, regions: usize) -> ListHead {
    ListHead { block: s.root + block * ListHead::block_bytes(regions), regions }
}

/// Nodes sorted by internal key.
fn sorted(space: &ListSpace, mut nodes: Vec<u64>) -> Vec<u64> {
    nodes.sort_by(|a, b| {
        let (x, y) = (space.node(*a).unwrap(), space.node(*b).unwrap());
        space.key_of(&x).unwrap().cmp(space.key_of(&y).unwrap()).then(y.trailer.cmp(&x.trailer))
    });
    nodes
}

/// Every node of `list` in order: (key, seq, value or None).
fn contents(space: &ListSpace, list: ListHead) -> Vec<(Vec<u8>, u64, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    space
        .walk(list, |n| {
            let v = (!n.is_delete()).then(|| space.value_of(n).unwrap().to_vec());
            out.push((space.key_of(n)?.to_vec(), n.seq(), v));
            Ok(())
        })
        .unwrap();
    out
}

/// The newest live value of each key.
fn newest(versions: &[Version]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut by_key: BTreeMap<u32, &Version> = BTreeMap::new();
    for v in versions {
        if by_key.get(&v.0).is_none_or(|o| o.1 < v.1) {
            by_key.insert(v.0, v);
        }
    }
    by_key.into_iter().filter_map(|(k, v)| v.2.clone().map(|val| (key(k), val))).collect()
}

/// Old versions for L1, then newer ones (overwrites, deletes, new keys,
/// several versions of a key in one list) for the L0 list.
fn workload(rng: &mut StdRng, n: u32) -> (Vec<Version>, Vec<Version>) {
    let mut seq = 1;
    let mut old = Vec::new();
    for k in 0..n {
        if rng.gen_bool(0.7) {
            seq += 1;
            old.push((k * 2, seq, Some(format!("old{k}").into_bytes())));
            if rng.gen_bool(0.2) {
                seq += 1;
                old.push((k * 2, seq, rng.gen_bool(0.5).then(|| format!("old2-{k}").into_bytes())));
            }
        }
    }
    let mut new = Vec::new();
    for _ in 0..n {
        seq += 1;
        let k = rng.gen_range(0..n * 2 + 4);
        new.push((k, seq, rng.gen_bool(0.7).then(|| format!("new{seq}").into_bytes())));
    }
    (old, new)
}

/// Merges `old` into an empty L1 (block 0) through an L0 list (block 2),
/// as the engine fills L1, and links `new` into an L0 list (block 1).
fn build(rng: &mut StdRng, n: u32, regions: usize) -> (Setup, Vec<Version>, ListHead, ListHead) {
    let (old, new) = workload(rng, n);
    let all: Vec<Version> = old.iter().chain(&new).cloned().collect();
    let (s, nodes) = setup(&all, regions);
    let space = space_of(&s);
    let (l1, l0, first) = (head(&s, 0, regions), head(&s, 1, regions), head(&s, 2, regions));
    space.link_sorted(first, &sorted(&space, nodes[..old.len()].to_vec())).unwrap();
    let z = zip(&space, first, l1, MAX_SEQ).unwrap();
    drop_shadowed(&space, l1, &z.shadowed).unwrap();
    reap(&space, l1, &z.tombstones).unwrap();
    space.link_sorted(l0, &sorted(&space, nodes[old.len()..].to_vec())).unwrap();
    (s, all, l0, l1)
}

/// The newest version of `k` through the L0 list, then L1.
fn read(space: &ListSpace, lists: &[ListHead], k: &[u8]) -> Option<Vec<u8>> {
    for &l in lists {
        if let Some(n) = space.seek(l, 0, k, trailer(MAX_SEQ, KIND_FOR_SEEK)).unwrap() {
            if space.key_of(&n).unwrap() == k {
                return (!n.is_delete()).then(|| space.value_of(&n).unwrap().to_vec());
            }
        }
    }
    None
}

#[test]
fn zipper_merges_drop_shadowed_versions_and_reap_tombstones() {
    for (seed, regions) in [(1u64, 1usize), (2, 2), (3, 4), (4, 1)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (s, all, l0, l1) = build(&mut rng, 400, regions);
        let space = space_of(&s);
        let z = zip(&space, l0, l1, MAX_SEQ).unwrap();
        assert!(!z.shadowed.is_empty(), "overwrites must hide older versions");
        let before = contents(&space, l1).len();
        let dropped = drop_shadowed(&space, l1, &z.shadowed).unwrap().len();
        assert!(
            dropped > 0 && dropped <= z.shadowed.len(),
            "a version a later one of its list hid twice is dropped once"
        );
        assert_eq!(contents(&space, l1).len(), before - dropped);
        // Every key once (newest), tombstones included until reaped.
        let got = contents(&space, l1);
        for w in got.windows(2) {
            assert!(w[0].0 < w[1].0, "one version per key after a merge with no snapshot");
        }
        let dead = reap(&space, l1, &z.tombstones).unwrap();
        // A candidate a newer version of its key (same list) unlinked is skipped.
        assert!(!dead.is_empty() && dead.len() <= z.tombstones.len());
        let live: BTreeMap<Vec<u8>, Vec<u8>> =
            contents(&space, l1).into_iter().map(|(k, _, v)| (k, v.expect("a tombstone survived reaping"))).collect();
        assert_eq!(live, newest(&all), "seed {seed}");
        // Cursors agree both ways, and seek lands right.
        let sp = Arc::new(space_of(&s));
        let mut it = ListIter::new(Arc::new(()), sp.clone(), l1);
        let (fwd, back) = crate::test_util::keys_both_ways(&mut it);
        assert_eq!(fwd.len(), live.len());
        assert_eq!(fwd, back);
        for k in live.keys() {
            let mut t = k.clone();
            t.extend_from_slice(&trailer(MAX_SEQ, KIND_FOR_SEEK).to_le_bytes());
            it.seek(&t).unwrap();
            assert_eq!(ParsedKey::parse(it.key()).unwrap().user_key, &k[..]);
        }
    }
}

#[test]
fn a_snapshot_keeps_the_versions_it_sees() {
    let mut rng = StdRng::seed_from_u64(9);
    let (s, all, l0, l1) = build(&mut rng, 200, 2);
    let space = space_of(&s);
    let bound = all.iter().map(|v| v.1).max().unwrap() / 2;
    zip(&space, l0, l1, bound).unwrap();
    // At the bound, every key reads as it did then.
    let at_bound: Vec<Version> = all.iter().filter(|v| v.1 <= bound).cloned().collect();
    for (k, want) in newest(&at_bound) {
        let t = trailer(bound, KIND_FOR_SEEK);
        let n = space.seek(l1, 0, &k, t).unwrap().unwrap();
        assert_eq!(space.key_of(&n).unwrap(), &k[..]);
        assert_eq!(space.value_of(&n).unwrap(), &want[..]);
    }
}

/// Crash images at every `every`-th PM event of a merge, the unlinking of
/// what it hid, and a reap.
#[test]
fn crash_images_during_a_merge_and_a_reap() {
    let every: u64 = std::env::var("STRATA_PMLIST_CRASH_EVERY").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    let mut rng = StdRng::seed_from_u64(21);
    let (s, all, l0, l1) = build(&mut rng, 150, 2);
    let want = newest(&all);
    let extents: Vec<(u64, u64)> = s.extents.iter().map(|e| (e.head().slot, e.head().number)).collect();
    let failures: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let checked = Arc::new(AtomicU64::new(0));
    {
        let (failures, checked, want) = (failures.clone(), checked.clone(), want.clone());
        let mut rng = StdRng::seed_from_u64(5);
        s.sim.set_observer(Some(Box::new(move |ev, view| {
            if ev % every != 0 {
                return;
            }
            for img in crate::test_util::crash_images(&view.crash_state(), &mut rng) {
                if let Err(e) = verify_image(img, &extents, l0, l1, &want) {
                    failures.lock().push(format!("event {ev}: {e}"));
                }
                checked.fetch_add(1, Ordering::Relaxed);
            }
        })));
    }
    let space = space_of(&s);
    let z = zip(&space, l0, l1, MAX_SEQ).unwrap();
    drop_shadowed(&space, l1, &z.shadowed).unwrap();
    reap(&space, l1, &z.tombstones).unwrap();
    s.sim.set_observer(None);
    let f = failures.lock();
    assert!(f.is_empty(), "{} of {} images failed; first: {}", f.len(), checked.load(Ordering::Relaxed), f[0]);
    assert!(checked.load(Ordering::Relaxed) > 100, "too few crash images: {}", checked.load(Ordering::Relaxed));
}

/// Reads every key through the L0 list then L1 as a crash left them, then
/// redoes the merge and reaps as recovery does, and compares with `want`.
fn verify_image(
    img: Vec<u8>,
    extents: &[(u64, u64)],
    l0: ListHead,
    l1: ListHead,
    want: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> std::result::Result<(), String> {
    let sim = Arc::new(SimPm::from_image(img));
    let region =
        Region::open(Backing::Sim(sim), &RegionOptions { create: false, ..opts() }).map_err(|e| e.to_string())?.0;
    let heads = region.heads().map_err(|e| e.to_string())?;
    let mut leased = Vec::new();
    for (slot, number) in extents {
        let h = heads.iter().find(|h| h.slot == *slot && h.number == *number).ok_or("extent head lost")?;
        leased.push(region.adopt(*h).map_err(|e| e.to_string())?);
    }
    let space = ListSpace::new(region, Arc::new(PathBuf::from("strata.pm")), leased);
    for (k, v) in want {
        let got = read(&space, &[l0, l1], k);
        if got.as_ref() != Some(v) {
            return Err(format!("before the redo, {} reads {got:?}", String::from_utf8_lossy(k)));
        }
    }
    zip(&space, l0, l1, MAX_SEQ).map_err(|e| format!("redo: {e}"))?;
    let shadowed = all_shadowed(&space, l1).map_err(|e| format!("walk: {e}"))?;
    drop_shadowed(&space, l1, &shadowed).map_err(|e| format!("drop: {e}"))?;
    let mut tombstones = Vec::new();
    space
        .walk(l1, |n| {
            if n.is_delete() {
                tombstones.push(n.off);
            }
            Ok(())
        })
        .map_err(|e| format!("walk: {e}"))?;
    reap(&space, l1, &tombstones).map_err(|e| format!("reap: {e}"))?;
    let got: BTreeMap<Vec<u8>, Vec<u8>> = contents(&space, l1)
        .into_iter()
        .map(|(k, _, v)| v.map(|v| (k, v)).ok_or("a tombstone survived"))
        .collect::<std::result::Result<_, _>>()?;
    if &got != want {
        return Err(format!("after the redo L1 holds {} keys, want {}", got.len(), want.len()));
    }
    Ok(())
}

/// The lists of [`merge_during_reads`]: L1 holds keys 105, 108 and 110,
/// the L0 list newer keys 106, 107 and 109 (all values).
fn interleaved_lists(regions: usize) -> (Arc<ListSpace>, ListHead, ListHead) {
    let old: Vec<Version> = [105, 108, 110].iter().zip(1..).map(|(&k, s)| (k, s, Some(vec![b'o']))).collect();
    let new: Vec<Version> = [106, 107, 109].iter().zip(10..).map(|(&k, s)| (k, s, Some(vec![b'n']))).collect();
    let all: Vec<Version> = old.iter().chain(&new).cloned().collect();
    let (s, nodes) = setup(&all, regions);
    let space = Arc::new(space_of(&s));
    let (l1, l0) = (head(&s, 0, regions), head(&s, 1, regions));
    space.link_sorted(l1, &sorted(&space, nodes[..old.len()].to_vec())).unwrap();
    space.link_sorted(l0, &sorted(&space, nodes[old.len()..].to_vec())).unwrap();
    (space, l0, l1)
}

/// Runs `read` after a merge of the L0 list into L1, then once for every
/// point at which a search of level 0 can stop in it, merging there (the
/// hook runs on the reading thread, between the search's reads), and
/// once with no merge; each run must return `want`.
fn merge_during_reads<T: PartialEq + std::fmt::Debug>(
    what: &str,
    want: T,
    read: impl Fn(&Arc<ListSpace>, ListHead, ListHead) -> T,
) {
    for regions in [1, 2] {
        for at in 0.. {
            let (space, l0, l1) = interleaved_lists(regions);
            if at == 0 {
                zip(&space, l0, l1, MAX_SEQ).unwrap();
            }
            let merged = std::rc::Rc::new(std::cell::Cell::new(at == 0));
            let (sp, done) = (space.clone(), merged.clone());
            let mut stops = 0;
            hook::on_stop(move |_| {
                if at == 0 {
                    return true;
                }
                stops += 1;
                if stops < at {
                    return false;
                }
                zip(&sp, l0, l1, MAX_SEQ).unwrap();
                done.set(true);
                true
            });
            let got = read(&space, l0, l1);
            hook::clear();
            let merged = merged.get();
            assert_eq!(got, want, "{what}, {regions} regions, merged at stop {at} of the reads: {merged}");
            if !merged {
                break;
            }
        }
    }
}

/// A cursor over the L0 list and L1, newest first, as the engine merges
/// them.
fn cursor(space: &Arc<ListSpace>, l0: ListHead, l1: ListHead) -> crate::iterator::MergingIterator {
    let it = |l| Box::new(ListIter::new(Arc::new(()), space.clone(), l)) as Box<dyn InternalIterator>;
    crate::iterator::MergingIterator::new(vec![it(l0), it(l1)])
}

/// The user keys `it` meets from where it is, moving forward (up to
/// `stop`) or back (down to `stop`): each key once in a row, so a key out
/// of order or met twice apart shows.
fn user_keys(it: &mut dyn InternalIterator, forward: bool, stop: &[u8]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    while it.valid() {
        let k = crate::key::user_key(it.key());
        if (forward && k > stop) || (!forward && k < stop) {
            break;
        }
        let k: u32 = std::str::from_utf8(k).unwrap().parse().unwrap();
        if out.last() != Some(&k) {
            out.push(k);
        }
        if forward {
            it.next().unwrap();
        } else {
            it.prev().unwrap();
        }
    }
    out
}

fn ikey(k: u32, seq: u64, kind: crate::key::Kind) -> Vec<u8> {
    crate::key::internal_key(&key(k), seq, kind)
}

/// The model's reverse scan over an exclusive end bound lost the range's
/// largest keys when a merge ran under it: a seek searched L1 to the node
/// before its target, then read that node's link again and took the
/// nodes the merge had linked in there since, which came before the
/// target (and, in the L0 list being merged, its nodes' links now lead
/// into L1). And a merged cursor turning back sought each list and then
/// stepped back from the node found, which could land past the key it
/// turned at (on a node merged in between). Each read here must be
/// right wherever the merge falls.
#[test]
fn reads_are_right_wherever_a_merge_falls() {
    use crate::key::Kind;
    // DbIter::seek_to_last with an excluded end: a seek, then a step back.
    merge_during_reads("reverse scan of (.., 108)", vec![107, 106, 105], |space, l0, l1| {
        let mut m = cursor(space, l0, l1);
        m.seek(&ikey(108, MAX_SEQ, Kind::Put)).unwrap();
        if m.valid() {
            m.prev().unwrap();
        } else {
            m.seek_to_last().unwrap();
        }
        user_keys(&mut m, false, &key(0))
    });
    // With an included end: the last entry at or before the bound.
    merge_during_reads("reverse scan of (..=108)", vec![108, 107, 106, 105], |space, l0, l1| {
        let mut m = cursor(space, l0, l1);
        m.seek_for_prev(&ikey(108, 0, Kind::Delete)).unwrap();
        user_keys(&mut m, false, &key(0))
    });
    merge_during_reads("forward scan of (108..)", vec![108, 109, 110], |space, l0, l1| {
        let mut m = cursor(space, l0, l1);
        m.seek(&ikey(108, MAX_SEQ, Kind::Put)).unwrap();
        user_keys(&mut m, true, &key(u32::MAX))
    });
    // A step back from a forward position, then forward again.
    merge_during_reads("zig-zag at 108", vec![vec![107, 106], vec![106, 107, 108]], |space, l0, l1| {
        let mut m = cursor(space, l0, l1);
        m.seek(&ikey(108, MAX_SEQ, Kind::Put)).unwrap();
        m.prev().unwrap();
        let back = user_keys(&mut m, false, &key(106));
        // On 105 now: forward again.
        m.next().unwrap();
        vec![back, user_keys(&mut m, true, &key(108))]
    });
    // Point reads through the L0 list, then L1, as a get does.
    let values: Vec<Option<Vec<u8>>> = [b'o', b'n', b'n', b'o', b'n', b'o'].iter().map(|&v| Some(vec![v])).collect();
    merge_during_reads("gets", values, |space, l0, l1| {
        [105, 106, 107, 108, 109, 110].iter().map(|&k| read(space, &[l0, l1], &key(k))).collect::<Vec<_>>()
    });
}
