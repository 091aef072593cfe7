//! Where the engine meets the fault rules (src/fault/). The message path
//! asks one question, `Engine::faults.any()` (one relaxed load), and calls
//! in here only when a rule stands, or when a receive queue still holds
//! messages a rule held back (`RecvQueue::holds_back`). Below every file
//! here: held.rs (the held messages of a queue, no engine types) and
//! sever.rs (a connection ended); above sever.rs the timer (timer.rs), and
//! above the timer the faults that act at once (immediate.rs) and those
//! that hold a message back in time (timed.rs).

pub(crate) mod held;
mod immediate;
mod sever;
mod timed;
mod timer;

pub(crate) use immediate::{Outbound, SendFault};
pub(crate) use timer::Deferred;
