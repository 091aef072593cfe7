//! udsfs-calls: the socket-call core that both fronts carry, the preload
//! library (`preload/`, in the program's process) and the seccomp supervisor
//! (`src/supervisor/`, for static and Go programs). A front turns a program's
//! call into these functions' arguments and their results back into the
//! program's memory and descriptors; what the daemon is asked and what its
//! answers mean is decided here, once.
//!
//! Like `udsfs-proto` it depends on libc only: the library links it and must
//! not link the daemon. Nothing here allocates or locks on the paths the
//! library takes in a signal handler (a send or receive of a small message):
//! the message buffer is the caller's (`client::MsgBuf`, on its stack).

pub mod accept;
pub mod bind;
pub mod client;
pub mod connect;
pub mod control;
pub mod convert;
#[cfg(test)]
mod fake;
pub mod fileflags;
pub mod mmsg;
pub mod opts;
pub mod pidfd;
pub mod record;
pub mod recv;
pub mod restart;
pub mod routed;
pub mod sigio;

pub use udsfs_proto::Res;
