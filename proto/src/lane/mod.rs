//! The fast lane (issue 30): the bytes of one connected stream or seqpacket
//! connection, moved through memory shared by its two ends' processes
//! instead of FUSE requests. docs/LANE.md has the design and the stages.
//!
//! One region per connection (a sealed memfd, `region`), holding a header
//! page and one ring per direction (`ring`); sleepers use shared futexes
//! (`futex`) or, for readiness in poll/epoll, an eventfd per end.
//!
//! Whatever sits in the region may have been written by an adversary (the
//! peer's process writes there too): every word is read once into a local,
//! checked, and never trusted for a bound. Each end keeps its own position
//! in its own memory and only publishes it. A check that fails is
//! `LaneErr::Corrupt`, sticky for that end: the connection is to be reset.
//! Nothing here allocates (the preload library calls it from signal
//! handlers' paths) or calls the C library's wrappers the library replaces
//! (system calls are made with `syscall`).

pub mod futex;
pub mod own_fd;
pub mod pump;
pub mod ready;
pub mod region;
pub mod ring;
pub mod state;

#[cfg(test)]
mod tests;

pub use region::{Region, Side};
pub use ring::{BUMP, Framing, LaneErr, Notify, Reader, Record, Sleeper, Writer};
pub use state::State;
