//! YCSB core workloads A–F, with YCSB's own generators and record layout.
//!
//! * Keys: `"user"` + the decimal of `fnvhash64(keynum)` (YCSB's default
//!   `insertorder=hashed`, `zeropadding=1`).
//! * Records: `fieldcount` fields `field0..` of `fieldlength` bytes, stored
//!   as YCSB's RocksDB binding serializes them: for each field a 4-byte
//!   big-endian name length, the name, a 4-byte value length, the value.
//! * Updates follow YCSB's RocksDB binding: read the record, replace one
//!   field, write the record back. Read-modify-write (F) is a read followed
//!   by such an update, as in `CoreWorkload.doTransactionReadModifyWrite`.
//! * Request distribution: scrambled Zipfian with constant 0.99 over
//!   `recordcount + expected inserts` (A, B, C, E, F); "latest" for D (a
//!   Zipfian over the distance from the newest insert). Scan lengths in E are
//!   uniform in [1, 100].

use crate::keygen::Mt64;

/// YCSB's Zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Item count of YCSB's scrambled Zipfian.
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// zeta(SCRAMBLED_ITEM_COUNT, 0.99), precomputed by YCSB.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes, made non-negative.
pub fn fnvhash64(mut val: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= val & 0xff;
        val >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    // Java's Math.abs on a long (Long.MIN_VALUE stays as is).
    (h as i64).wrapping_abs() as u64
}

/// The YCSB key of record `keynum`.
pub fn key_name(keynum: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"user");
    out.extend_from_slice(fnvhash64(keynum).to_string().as_bytes());
}

/// Sum of 1/(i+1)^theta for i in [start, n), added to `initial`.
pub fn zeta(start: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in start..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`: item 0 most popular, P(i) ∝ 1/(i+1)^theta.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items in [min, max] with constant `theta`; computes zeta (O(max-min)).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max.saturating_sub(min) + 1;
        Zipfian::with_zetan(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// As [`Zipfian::new`] with zeta(items) given.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max.saturating_sub(min) + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian { items, base: min, theta, zeta2theta, alpha: 1.0 / (1.0 - theta), zetan, eta, count_for_zeta: items }
    }

    /// A value in [base, base + item_count); the item count may grow
    /// between calls (zeta is then extended incrementally, as YCSB does).
    pub fn next_with_count(&mut self, item_count: u64, rng: &mut Mt64) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            // YCSB keeps `items` (the original count) in eta.
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let v = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + v.min(item_count.saturating_sub(1))
    }

    /// A value over the generator's own item count.
    pub fn next(&mut self, rng: &mut Mt64) -> u64 {
        self.next_with_count(self.items, rng)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: Zipfian popularity, popular items
/// spread over the key space by hashing.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// Items in [min, max].
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            item_count: max.saturating_sub(min) + 1,
            gen: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// The next item.
    pub fn next(&mut self, rng: &mut Mt64) -> u64 {
        let r = self.gen.next(rng);
        self.min + fnvhash64(r) % self.item_count
    }
}

/// YCSB's `SkewedLatestGenerator`: recent inserts are the most popular.
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    gen: Zipfian,
}

impl SkewedLatest {
    /// For a key space whose newest key is `last` at the start.
    pub fn new(last: u64) -> SkewedLatest {
        SkewedLatest { gen: Zipfian::new(0, last.saturating_sub(1), ZIPFIAN_CONSTANT) }
    }

    /// A key number near `last` (the newest key now).
    pub fn next(&mut self, last: u64, rng: &mut Mt64) -> u64 {
        last - self.gen.next_with_count(last.max(1), rng).min(last)
    }
}

/// One YCSB operation type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbOp {
    /// Read a whole record.
    Read,
    /// Replace one field (read, modify, write back).
    Update,
    /// Insert a new record.
    Insert,
    /// Read up to N records from a start key.
    Scan,
    /// Read a record, then update it.
    ReadModifyWrite,
}

/// Which keys requests go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Scrambled Zipfian.
    Zipfian,
    /// Skewed towards the latest insert.
    Latest,
}

/// A core workload's proportions.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// `a`..`f`.
    pub name: char,
    /// (operation, proportion) pairs, summing to 1.
    pub mix: Vec<(YcsbOp, f64)>,
    /// Request distribution.
    pub distribution: Distribution,
    /// Longest scan (YCSB `maxscanlength`).
    pub max_scan_length: u64,
}

impl Workload {
    /// The core workload `ycsba`..`ycsbf`, or None.
    pub fn by_name(name: &str) -> Option<Workload> {
        use YcsbOp::*;
        let (c, mix, distribution) = match name {
            "ycsba" => ('a', vec![(Read, 0.5), (Update, 0.5)], Distribution::Zipfian),
            "ycsbb" => ('b', vec![(Read, 0.95), (Update, 0.05)], Distribution::Zipfian),
            "ycsbc" => ('c', vec![(Read, 1.0)], Distribution::Zipfian),
            "ycsbd" => ('d', vec![(Read, 0.95), (Insert, 0.05)], Distribution::Latest),
            "ycsbe" => ('e', vec![(Scan, 0.95), (Insert, 0.05)], Distribution::Zipfian),
            "ycsbf" => ('f', vec![(Read, 0.5), (ReadModifyWrite, 0.5)], Distribution::Zipfian),
            _ => return None,
        };
        Some(Workload { name: c, mix, distribution, max_scan_length: 100 })
    }

    /// Share of inserts.
    pub fn insert_proportion(&self) -> f64 {
        self.mix.iter().filter(|(op, _)| *op == YcsbOp::Insert).map(|(_, p)| p).sum()
    }

    /// Picks an operation from a uniform draw `u` in [0, 1).
    pub fn choose(&self, u: f64) -> YcsbOp {
        let mut acc = 0.0;
        for (op, p) in &self.mix {
            acc += p;
            if u < acc {
                return *op;
            }
        }
        self.mix.last().map(|(op, _)| *op).unwrap_or(YcsbOp::Read)
    }
}

/// Builds a record of `fields` fields of `len` bytes each from `fill`.
pub fn encode_record(fields: usize, len: usize, fill: &mut dyn FnMut(usize) -> Vec<u8>, out: &mut Vec<u8>) {
    out.clear();
    for i in 0..fields {
        let name = format!("field{i}");
        put_field(out, name.as_bytes(), &fill(len));
    }
}

fn put_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(&(name.len() as u32).to_be_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(value);
}

/// Splits a serialized record into (name, value) fields; None if malformed.
pub fn decode_record(mut buf: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    fn take<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (len, rest) = buf.split_first_chunk::<4>()?;
        let len = u32::from_be_bytes(*len) as usize;
        let (item, rest) = (rest.get(..len)?, rest.get(len..)?);
        *buf = rest;
        Some(item)
    }
    let mut fields = Vec::new();
    while !buf.is_empty() {
        let name = take(&mut buf)?;
        let value = take(&mut buf)?;
        fields.push((name, value));
    }
    Some(fields)
}

/// Replaces field `index` of a serialized record with `value` (the
/// binding's merge of the old fields with the new one); None if malformed.
pub fn update_record(old: &[u8], index: usize, value: &[u8]) -> Option<Vec<u8>> {
    let fields = decode_record(old)?;
    let target = format!("field{index}");
    let mut out = Vec::with_capacity(old.len() + value.len());
    let mut replaced = false;
    for (name, v) in fields {
        if name == target.as_bytes() {
            put_field(&mut out, name, value);
            replaced = true;
        } else {
            put_field(&mut out, name, v);
        }
    }
    if !replaced {
        put_field(&mut out, target.as_bytes(), value);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_fnv1a_of_le_bytes() {
        // FNV-1a 64 of eight zero bytes, computed independently.
        let mut h: u64 = 0xcbf29ce484222325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(fnvhash64(0), (h as i64).wrapping_abs() as u64);
        assert_ne!(fnvhash64(1), fnvhash64(2));
        assert!(fnvhash64(12345) <= i64::MAX as u64);
    }

    #[test]
    fn keys_look_like_ycsb_keys() {
        let mut k = Vec::new();
        key_name(0, &mut k);
        assert!(k.starts_with(b"user"));
        assert!(k[4..].iter().all(u8::is_ascii_digit));
        assert_eq!(String::from_utf8(k).unwrap(), format!("user{}", fnvhash64(0)));
    }

    #[test]
    fn zeta_small_values() {
        assert!((zeta(0, 1, 0.99, 0.0) - 1.0).abs() < 1e-12);
        assert!((zeta(0, 2, 0.99, 0.0) - (1.0 + 0.5f64.powf(0.99))).abs() < 1e-12);
        let full = zeta(0, 1000, 0.99, 0.0);
        let split = zeta(500, 1000, 0.99, zeta(0, 500, 0.99, 0.0));
        assert!((full - split).abs() < 1e-9);
    }

    #[test]
    fn zipfian_stays_in_range_and_favours_small_items() {
        let mut rng = Mt64::new(7);
        let mut z = Zipfian::new(0, 999, ZIPFIAN_CONSTANT);
        let mut counts = vec![0u64; 1000];
        let draws = 200_000;
        for _ in 0..draws {
            let v = z.next(&mut rng) as usize;
            assert!(v < 1000);
            counts[v] += 1;
        }
        // P(0) = 1/zeta(1000) ~ 0.134; P(1)/P(0) = 2^-0.99.
        let p0 = counts[0] as f64 / draws as f64;
        let expect0 = 1.0 / zeta(0, 1000, 0.99, 0.0);
        assert!((p0 - expect0).abs() < 0.01, "p0 {p0} expected {expect0}");
        let ratio = counts[1] as f64 / counts[0] as f64;
        assert!((ratio - 0.5f64.powf(0.99)).abs() < 0.03, "ratio {ratio}");
        // The top 10% of items take most requests.
        let top: u64 = counts[..100].iter().sum();
        assert!(top as f64 / draws as f64 > 0.6);
    }

    #[test]
    fn zipfian_is_deterministic_for_a_seed() {
        let draw = |seed| {
            let mut rng = Mt64::new(seed);
            let mut z = ScrambledZipfian::new(0, 9999);
            (0..100).map(|_| z.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys() {
        let mut rng = Mt64::new(11);
        let mut z = ScrambledZipfian::new(0, 9999);
        let mut counts = vec![0u64; 10_000];
        for _ in 0..100_000 {
            let v = z.next(&mut rng) as usize;
            assert!(v < 10_000);
            counts[v] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        // Skewed: the hottest key is far above the mean of 10 ...
        assert!(sorted[0] > 1000);
        // ... and it is not key 0 (hashing moved it).
        let hottest = counts.iter().enumerate().max_by_key(|(_, c)| **c).map(|(i, _)| i).unwrap();
        assert_eq!(hottest as u64, fnvhash64(0) % 10_000);
    }

    #[test]
    fn zipfian_accepts_a_growing_item_count() {
        let mut rng = Mt64::new(3);
        let mut z = Zipfian::new(0, 99, ZIPFIAN_CONSTANT);
        for n in [100u64, 150, 1000] {
            for _ in 0..1000 {
                assert!(z.next_with_count(n, &mut rng) < n);
            }
        }
    }

    #[test]
    fn latest_prefers_recent_keys() {
        let mut rng = Mt64::new(5);
        let mut g = SkewedLatest::new(1000);
        let mut recent = 0;
        for _ in 0..10_000 {
            let v = g.next(1000, &mut rng);
            assert!(v <= 1000);
            if v >= 990 {
                recent += 1;
            }
        }
        assert!(recent > 4000, "{recent}");
    }

    #[test]
    fn workload_mixes() {
        let a = Workload::by_name("ycsba").unwrap();
        assert_eq!(a.choose(0.1), YcsbOp::Read);
        assert_eq!(a.choose(0.9), YcsbOp::Update);
        let d = Workload::by_name("ycsbd").unwrap();
        assert_eq!(d.distribution, Distribution::Latest);
        assert!((d.insert_proportion() - 0.05).abs() < 1e-12);
        assert_eq!(Workload::by_name("ycsbe").unwrap().choose(0.5), YcsbOp::Scan);
        assert_eq!(Workload::by_name("ycsbf").unwrap().choose(0.99), YcsbOp::ReadModifyWrite);
        assert!(Workload::by_name("ycsbz").is_none());
        for n in ["ycsba", "ycsbb", "ycsbc", "ycsbd", "ycsbe", "ycsbf"] {
            let w = Workload::by_name(n).unwrap();
            assert!((w.mix.iter().map(|(_, p)| p).sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn records_round_trip_and_update_one_field() {
        let mut n = 0u8;
        let mut fill = |len: usize| {
            n += 1;
            vec![b'a' + n; len]
        };
        let mut rec = Vec::new();
        encode_record(10, 100, &mut fill, &mut rec);
        assert_eq!(rec.len(), 10 * (4 + 6 + 4 + 100));
        let fields = decode_record(&rec).unwrap();
        assert_eq!(fields.len(), 10);
        assert_eq!(fields[3].0, b"field3");
        let new = update_record(&rec, 3, &[b'z'; 100]).unwrap();
        let f2 = decode_record(&new).unwrap();
        assert_eq!(f2[3].1, &[b'z'; 100][..]);
        assert_eq!(f2[4], fields[4]);
        assert!(decode_record(&rec[..rec.len() - 1]).is_none());
    }
}
