//! The FUSE requests that may wait, as the park table (`park.rs`) holds
//! them: each with the reply it owes and what is needed to retry it.

use std::sync::Arc;

use nix::errno::Errno;

use super::ioctl::MsgCall;
use super::outgoing::WriteJob;
use super::park::Park;
use super::reply::{DataReply, IoctlReply, OpenReply, WriteReply};
use crate::engine::Socket;

/// A reply still owed, with what is needed to retry the operation.
pub enum Pending {
    Read {
        fh: u64,
        size: u32,
        reply: DataReply,
    },
    Write {
        fh: u64,
        /// What was taken and how far it got.
        job: WriteJob<'static>,
        reply: WriteReply,
    },
    Open {
        op: OpenOp,
        reply: OpenReply,
    },
    /// A UDSFS_IOC_MSG send or receive of a caller that blocks.
    Msg {
        fh: u64,
        call: MsgCall,
        reply: IoctlReply,
    },
    /// A request on `sock` held until its lane's way down is done (it
    /// waits for an end's busy word, src/engine/lane.rs): `run(Ok)` then
    /// runs it again whole (io.rs); `run(Err)` answers it with that errno.
    AfterLane {
        sock: Arc<Socket>,
        /// The bytes it holds (a write's).
        held: u64,
        run: Box<dyn FnOnce(Result<(), Errno>) + Send>,
    },
}

/// Opens that can block.
pub enum OpenOp {
    /// Opening `.udsfs/sock/N/accept`.
    Accept {
        sock: Arc<Socket>,
        uid: u32,
        gid: u32,
    },
    /// Opening a node of the connect view: the client socket made for it.
    Connect {
        client: Arc<Socket>,
        target: Arc<Socket>,
    },
}

impl Pending {
    /// Answers with an error, whatever was done (see `Retry::abandon`).
    pub fn fail(self, err: Errno) {
        match self {
            Pending::Read { reply, .. } => reply.error(err),
            Pending::Write { reply, .. } => reply.error(err),
            Pending::Open { reply, .. } => reply.error(err),
            Pending::Msg { reply, .. } => reply.error(err),
            Pending::AfterLane { run, .. } => run(Err(err)),
        }
    }
}

impl Park for Pending {
    fn held_bytes(&self) -> u64 {
        match self {
            Pending::Write { job, .. } => job.held_bytes(),
            Pending::Msg { call, .. } => call.held_bytes(),
            Pending::AfterLane { held, .. } => *held,
            Pending::Read { .. } | Pending::Open { .. } => 0,
        }
    }

    fn exclusive(&self) -> bool {
        matches!(self, Pending::Read { .. })
    }

    fn plain_read(&self) -> bool {
        matches!(self, Pending::Read { .. })
    }
}
