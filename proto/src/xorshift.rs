//! xorshift64*: reproducible randomness for the randomized tests (the lane ring's
//! model in `lane/tests.rs`, the daemon's park model in `tests/park_model.rs`); a
//! test prints its seed, so a failure replays. Not for anything that needs secrecy.

/// The generator; its state is the seed (not 0: a zero state stays zero).
pub struct Rng(pub u64);

impl Rng {
    /// The next number (never ending: not an `Iterator`, whose `next` is an Option).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
