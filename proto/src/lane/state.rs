//! The connection's state word (the header's word at `region::OFF_STATE`).

numbered! {
/// The connection's state, which only the daemon changes. An end acts on
/// its own only in `Direct`; any other value sends it to the daemon, and a
/// value that is none of these is corruption.
pub enum State {
    /// Being set up: not for use yet.
    Setup = 0,
    /// Each end writes into the ring the other reads.
    Direct = 1,
    /// The daemon moves the messages (an observer is attached): ask it.
    Through = 2,
    /// The connection is closed or reset: ask the daemon what to report.
    Closed = 3,
}
}

impl State {
    pub fn from_word(w: u32) -> Option<State> {
        State::try_from(w).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::State;

    #[test]
    fn states_come_from_their_words_only() {
        for w in 0..64 {
            let s = State::from_word(w);
            assert_eq!(s.map(|s| s as u32), (w <= 3).then_some(w), "word {w}");
        }
        assert_eq!(State::from_word(u32::MAX), None);
    }
}
