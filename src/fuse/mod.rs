//! The FUSE front end: a thin map from files to engine calls. Requests that
//! would block are parked (see `park`), never held on a worker thread.
//!
//! `adapter` is the `fuser::Filesystem` impl and the only module that sees
//! fuser's replies; it calls the front end `Inner` (`front`), whose
//! operations are split by topic and return values, or answer through a
//! typed reply (`reply`) when they may wait.

pub mod actfor;
mod adapter;
mod alarm;
mod attr;
mod capture;
mod dir_cursor;
mod faults;
mod files;
mod front;
pub mod inode;
mod io;
mod ioctl;
mod lookup;
mod open;
mod outgoing;
pub mod park;
mod pending;
mod poll;
mod poll_waiter;
mod readdir;
pub mod reply;
mod tree_edit;
mod watchdog;

pub use adapter::UdsFs;
pub use attr::synthetic;
pub use front::Inner;
