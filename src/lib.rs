//! udsfs: the Linux AF_UNIX socket layer in userspace, exposed as a FUSE filesystem.
//!
//! `engine` has the sockets and knows nothing of FUSE; `fuse` maps files to
//! engine calls; `cli` is the command line.

pub mod capture;
pub mod cli;
pub mod ctl;
pub mod engine;
pub mod fault;
pub mod fdchannel;
pub mod fuse;
pub mod msgfmt;
pub mod pidfd;
pub mod procfs;
pub mod run;
pub mod sharded;
pub mod supervisor;
pub mod wildcard;
