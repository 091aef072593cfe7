//! The pseudo-random numbers behind toxicity, jitter and slice sizes:
//! splitmix64, one stream per rule, so that a rule with a seed makes the same
//! decisions for the same sequence of messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A splitmix64 generator: 64 bits of state, a Weyl sequence through a
/// mixing function. Small, fast, and statistically fine for fault dice.
#[derive(Clone, Debug)]
pub struct Prng {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl Prng {
    pub fn new(seed: u64) -> Prng {
        Prng { state: seed }
    }

    /// A generator for a rule given no seed: different on every call, so two
    /// unseeded rules do not throw the same dice.
    pub fn unseeded() -> Prng {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        Prng::new(mix(nanos ^ mix(n.wrapping_add(std::process::id() as u64))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix(self.state)
    }

    /// Uniform in [0, 1), with the 53 bits an f64 holds.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (0 when n is 0), by a widening multiply: no modulo
    /// bias worth measuring for the ranges faults use.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [-r, r].
    pub fn plus_minus(&mut self, r: u64) -> i64 {
        let r = r.min(i64::MAX as u64 / 2);
        self.below(2 * r + 1) as i64 - r as i64
    }

    /// True with probability `p` (always for p ≥ 1, never for p ≤ 0).
    pub fn chance(&mut self, p: f64) -> bool {
        if p >= 1.0 {
            return true;
        }
        self.next_f64() < p
    }
}

/// splitmix64's finaliser (a variant of MurmurHash3's fmix64).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_different_seed_different() {
        let take = |seed| {
            let mut p = Prng::new(seed);
            (0..64).map(|_| p.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(take(7), take(7));
        assert_ne!(take(7), take(8));
    }

    #[test]
    fn ranges_hold() {
        let mut p = Prng::new(1);
        let mut seen = [false; 7];
        for _ in 0..10_000 {
            let f = p.next_f64();
            assert!((0.0..1.0).contains(&f));
            assert!(p.below(10) < 10);
            let pm = p.plus_minus(3);
            assert!((-3..=3).contains(&pm));
            seen[(pm + 3) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "every value of [-3, 3] drawn");
        assert_eq!(p.below(0), 0);
        assert_eq!(p.plus_minus(0), 0);
    }

    #[test]
    fn unseeded_generators_differ() {
        assert_ne!(Prng::unseeded().next_u64(), Prng::unseeded().next_u64());
    }
}
