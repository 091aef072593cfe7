//! The connection's state word (the header's word at `region::OFF_STATE`).

/// The connection's state, which only the daemon changes. An end acts on
/// its own only in `Direct`; any other value sends it to the daemon, and a
/// value that is none of these is corruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

impl State {
    pub fn from_word(w: u32) -> Option<State> {
        Some(match w {
            0 => State::Setup,
            1 => State::Direct,
            2 => State::Through,
            3 => State::Closed,
            _ => return None,
        })
    }
}
