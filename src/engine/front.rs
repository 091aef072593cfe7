//! What every front end (the `msg` file, the message ioctl that the preload
//! library and the seccomp supervisor use) does around a sendmsg: the
//! explicit credentials a client gave checked, the sockets and files it
//! names held for passing, and whatever the send did not queue put back.

use std::sync::Arc;

use super::addr::Addr;
use super::depot::{PassedFile, is_file_tag};
use super::message::SendMsg;
use super::socket::Socket;
use super::{Caller, Engine, Result, Ucred};

/// The passed references and credentials of one sendmsg, held from its
/// first try until the message carrying them is queued (as sendmsg holds
/// its fds while it waits); `Engine::put_back` lets go of what is left.
#[derive(Default)]
pub struct Outgoing {
    /// SCM_CREDENTIALS in the daemon's pid namespace, checked.
    pub creds: Option<Ucred>,
    pub rights: Vec<Arc<Socket>>,
    /// Beside `rights`: each passed from an O_NONBLOCK descriptor.
    pub nonblock: Vec<bool>,
    pub files: Vec<PassedFile>,
}

impl Outgoing {
    /// The send of `data` carrying what this holds.
    pub fn msg<'a>(&'a mut self, data: &'a [u8], to: Option<&'a Addr>, oob: bool) -> SendMsg<'a> {
        SendMsg {
            data,
            to,
            creds: self.creds,
            rights: Some(&mut self.rights),
            nonblock: Some(&mut self.nonblock),
            files: Some(&mut self.files),
            oob,
            call_off: 0,
            untapped: false,
            past_bound: false,
            resumed: false,
        }
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.rights.is_empty() && self.files.is_empty()
    }
}

impl Engine {
    /// SCM_CREDENTIALS as a client gave them (its pid in its own pid
    /// namespace, its ids in its own user namespace) in the daemon's terms; `check`: as scm_check_creds
    /// allows them (a retry of a send checked already skips it).
    pub fn sender_creds(
        &self,
        given: Option<Ucred>,
        caller: &Caller,
        check: bool,
    ) -> Result<Option<Ucred>> {
        let Some(c) = given else { return Ok(None) };
        let c = caller.claimed_ids(super::pidns::sender_creds(c, caller)?)?;
        if check {
            caller.check_creds(&c)?;
        }
        Ok(Some(c))
    }

    /// A front end's sendmsg prologue: the credentials (`sender_creds`),
    /// then the sockets and deposited files `ids` names held for passing.
    /// On an error nothing stays held.
    pub fn prepare_send(
        &self,
        given: Option<Ucred>,
        ids: &[u64],
        caller: &Caller,
        check: bool,
    ) -> Result<Outgoing> {
        let creds = self.sender_creds(given, caller, check)?;
        let (rights, files) = self.hold_passed(ids, caller)?;
        let nonblock = ids
            .iter()
            .filter(|i| !is_file_tag(**i))
            .map(|&i| udsfs_proto::passed::socket_of(i).1)
            .collect();
        Ok(Outgoing {
            creds,
            rights,
            nonblock,
            files,
        })
    }

    /// Lets go of what a send did not queue: the sockets' references, and
    /// the files back to their deposits for the sender's retry.
    pub fn put_back(&self, out: Outgoing) {
        for r in out.rights {
            self.put(&r);
        }
        self.depot.put_back(out.files);
    }
}
