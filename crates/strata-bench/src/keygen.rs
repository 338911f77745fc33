//! Keys and values exactly as RocksDB's `db_bench` makes them, so that the
//! same command line means the same work for both engines.
//!
//! * Random numbers: `Random64` in db_bench is `std::mt19937_64` seeded with
//!   `--seed` plus a per-thread counter; [`Mt64`] reproduces it bit for bit.
//! * Keys: `GenerateKeyFromInt` writes the low `min(key_size, 8)` bytes of
//!   the key number big-endian, then pads with ASCII `'0'` ([`format_key`]).
//! * Random keys: `Next() % num` (uniform with replacement).
//! * Values: `RandomGenerator`, a 1 MiB buffer of 100-byte pieces, each a
//!   random printable prefix of `compression_ratio` of its length repeated
//!   ([`ValueGen`]), filled from LevelDB's `Random(301)` ([`LcgRandom`]).

/// `std::mt19937_64`: the 64-bit Mersenne Twister of the C++ standard.
#[derive(Clone)]
pub struct Mt64 {
    state: Box<[u64; 312]>,
    index: usize,
}

const MT_N: usize = 312;
const MT_M: usize = 156;
const MT_MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
const MT_UPPER: u64 = 0xFFFF_FFFF_8000_0000;
const MT_LOWER: u64 = 0x7FFF_FFFF;

impl Mt64 {
    /// Seeds the generator as `std::mt19937_64(seed)` does.
    pub fn new(seed: u64) -> Mt64 {
        let mut state = Box::new([0u64; MT_N]);
        state[0] = seed;
        for i in 1..MT_N {
            let prev = state[i - 1];
            state[i] = 6_364_136_223_846_793_005u64.wrapping_mul(prev ^ (prev >> 62)).wrapping_add(i as u64);
        }
        Mt64 { state, index: MT_N }
    }

    fn twist(&mut self) {
        for i in 0..MT_N {
            let x = (self.state[i] & MT_UPPER) | (self.state[(i + 1) % MT_N] & MT_LOWER);
            let mut xa = x >> 1;
            if x & 1 != 0 {
                xa ^= MT_MATRIX_A;
            }
            self.state[i] = self.state[(i + MT_M) % MT_N] ^ xa;
        }
        self.index = 0;
    }

    /// The next 64-bit output (`generator_()` in db_bench's `Random64::Next`).
    pub fn next_u64(&mut self) -> u64 {
        if self.index >= MT_N {
            self.twist();
        }
        let mut x = self.state[self.index];
        self.index += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^= x >> 43;
        x
    }

    /// A uniform double in [0, 1) from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `Next() % n`, as db_bench draws random keys (n > 0; 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.next_u64() % n
    }
}

/// Writes the db_bench key for key number `v` into `out` (cleared first):
/// the low `min(key_size, 8)` bytes of `v` big-endian, then `'0'` up to
/// `key_size` bytes.
pub fn format_key(v: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    let fill = key_size.min(8);
    for i in 0..fill {
        out.push(((v >> ((fill - i - 1) * 8)) & 0xff) as u8);
    }
    out.resize(key_size, b'0');
}

/// How a writing benchmark picks key numbers (db_bench `WriteMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// 0, 1, 2, ...
    Sequential,
    /// Uniform with replacement from [0, num).
    Random,
}

/// db_bench's `KeyGenerator` for the SEQUENTIAL and RANDOM modes.
pub struct KeyGen {
    order: KeyOrder,
    num: u64,
    next: u64,
}

impl KeyGen {
    /// Key numbers in [0, num) in the given order.
    pub fn new(order: KeyOrder, num: u64) -> KeyGen {
        KeyGen { order, num, next: 0 }
    }

    /// The next key number, drawing from `rng` in random order.
    pub fn next(&mut self, rng: &mut Mt64) -> u64 {
        match self.order {
            KeyOrder::Sequential => {
                let v = self.next;
                self.next += 1;
                v
            }
            KeyOrder::Random => rng.below(self.num),
        }
    }
}

/// LevelDB/RocksDB `Random`: the Park–Miller generator (16807 mod 2^31-1).
pub struct LcgRandom {
    seed: u32,
}

impl LcgRandom {
    const M: u32 = 2_147_483_647;

    /// Seeds as `Random(s)` does (0 and multiples of M become 1).
    pub fn new(s: u32) -> LcgRandom {
        let s = s & Self::M;
        LcgRandom { seed: if s != 0 { s } else { 1 } }
    }

    /// The next value in [1, 2^31-2].
    pub fn next_u32(&mut self) -> u32 {
        let product = u64::from(self.seed) * 16807;
        let mut seed = ((product >> 31) + (product & u64::from(Self::M))) as u32;
        if seed > Self::M {
            seed -= Self::M;
        }
        self.seed = seed;
        seed
    }

    /// `Next() % n` (n > 0).
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next_u32() % n.max(1)
    }
}

/// db_bench's `RandomGenerator`: slices of a buffer of compressible data.
pub struct ValueGen {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGen {
    /// A buffer of at least 1 MiB (and at least `value_size`) whose 100-byte
    /// pieces compress to about `compression_ratio` of their size.
    pub fn new(value_size: usize, compression_ratio: f64) -> ValueGen {
        let mut rnd = LcgRandom::new(301);
        let want = value_size.max(1 << 20);
        let mut data = Vec::with_capacity(want + 100);
        while data.len() < want {
            let raw = ((100.0 * compression_ratio) as usize).max(1);
            let piece: Vec<u8> = (0..raw).map(|_| b' ' + rnd.uniform(95) as u8).collect();
            let start = data.len();
            while data.len() - start < 100 {
                data.extend_from_slice(&piece);
            }
            data.truncate(start + 100);
        }
        ValueGen { data, pos: 0 }
    }

    /// The next `len` bytes of the buffer (wrapping to its start).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        self.data.get(self.pos - len..self.pos).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt64_matches_the_cpp_standard() {
        // [rand.predef]: the 10000th output of a default-constructed
        // mt19937_64 (seed 5489) is 9981545732273789042.
        let mut g = Mt64::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = g.next_u64();
        }
        assert_eq!(last, 9_981_545_732_273_789_042);
    }

    #[test]
    fn mt64_first_outputs_for_seed_5489() {
        let mut g = Mt64::new(5489);
        assert_eq!(g.next_u64(), 14_514_284_786_278_117_030);
        assert_eq!(g.next_u64(), 4_620_546_740_167_642_908);
    }

    #[test]
    fn key_layout_is_big_endian_then_ascii_zero() {
        let mut k = Vec::new();
        format_key(0x0102_0304_0506_0708, 16, &mut k);
        assert_eq!(&k[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&k[8..], b"00000000");
        format_key(258, 4, &mut k);
        assert_eq!(k, vec![0, 0, 1, 2]);
        format_key(7, 9, &mut k);
        assert_eq!(k, vec![0, 0, 0, 0, 0, 0, 0, 7, b'0']);
    }

    #[test]
    fn keys_sort_like_their_numbers() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (x, y) in [(1u64, 2u64), (255, 256), (65_535, 1 << 40)] {
            format_key(x, 16, &mut a);
            format_key(y, 16, &mut b);
            assert!(a < b, "{x} {y}");
        }
    }

    #[test]
    fn sequential_and_random_orders() {
        let mut rng = Mt64::new(42);
        let mut g = KeyGen::new(KeyOrder::Sequential, 10);
        assert_eq!((0..3).map(|_| g.next(&mut rng)).collect::<Vec<_>>(), vec![0, 1, 2]);
        let mut g = KeyGen::new(KeyOrder::Random, 1000);
        let mut check = Mt64::new(42);
        // The sequential generator drew nothing, so both streams align.
        for _ in 0..100 {
            let v = g.next(&mut rng);
            assert!(v < 1000);
            assert_eq!(v, check.next_u64() % 1000);
        }
    }

    #[test]
    fn lcg_matches_leveldb_random() {
        // Park-Miller minimal standard: from seed 1 the 10000th value is 1043618065.
        let mut r = LcgRandom::new(1);
        let mut last = 0;
        for _ in 0..10_000 {
            last = r.next_u32();
        }
        assert_eq!(last, 1_043_618_065);
    }

    #[test]
    fn values_are_printable_and_half_compressible() {
        let mut g = ValueGen::new(100, 0.5);
        let v = g.generate(100).to_vec();
        assert_eq!(v.len(), 100);
        assert!(v.iter().all(|b| (b' '..=b'~').contains(b)));
        // A 100-byte piece is a 50-byte random string written twice.
        assert_eq!(v[..50], v[50..]);
        assert_ne!(g.generate(100), &v[..]);
    }
}
