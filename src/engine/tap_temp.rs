//! TEMP: the tap calls a capture needs, until the message path makes them
//! itself (this file and its call sites go when it does).

use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::held::HeldFile;
use super::socket::Socket;
use super::tap::{Endpoint, Event, Origin, PassedSocket, Queued};
use super::{Caller, Engine, Ucred};

impl Engine {
    pub(crate) fn tap_endpoint(&self, s: &Socket) -> Endpoint {
        let name = s.lock().name.as_ref().map(|n| n.addr.clone());
        self.tap_endpoint_named(s, name)
    }

    pub(crate) fn tap_endpoint_named(&self, s: &Socket, name: Option<super::Addr>) -> Endpoint {
        Endpoint {
            id: s.id,
            ty: s.ty,
            name,
            owner_uid: self.dir(s.id).map_or(0, |d| d.uid),
        }
    }

    pub(crate) fn tap_origin(caller: &Caller) -> Origin {
        Origin {
            pid: caller.scm_creds().pid as u32,
            tid: caller.tid,
            uid: caller.fsuid,
            gid: caller.fsgid,
        }
    }

    pub(crate) fn tap_passed(rights: &[Arc<Socket>]) -> Vec<PassedSocket> {
        rights
            .iter()
            .map(|r| PassedSocket {
                id: r.id,
                ty: r.ty,
                name: r.lock().name.as_ref().map(|n| n.addr.clone()),
            })
            .collect()
    }

    pub(crate) fn tap_files(files: &[HeldFile]) -> Vec<&'static str> {
        files
            .iter()
            .map(|f| {
                // SAFETY: fstat only fills the struct.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                let fd = f.fd.as_raw_fd();
                if unsafe { libc::fstat(fd, &mut st) } != 0 {
                    return "file";
                }
                match st.st_mode & libc::S_IFMT {
                    libc::S_IFIFO => "pipe",
                    libc::S_IFSOCK => "socket",
                    libc::S_IFCHR => "character device",
                    libc::S_IFDIR => "directory",
                    _ => "file",
                }
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tap_queued(
        &self,
        msg_id: u64,
        from: &Socket,
        to: &Socket,
        caller: &Caller,
        creds: Option<Ucred>,
        sockets: &[PassedSocket],
        files: &[&'static str],
        oob: bool,
        data: &[u8],
    ) {
        let (f, t) = (self.tap_endpoint(from), self.tap_endpoint(to));
        self.taps.queued(&Queued {
            msg_id,
            from: &f,
            to: &t,
            origin: Self::tap_origin(caller),
            creds,
            sockets,
            files,
            oob,
            data,
        });
    }

    pub(crate) fn tap_event(&self, caller: Option<&Caller>, e: Event) {
        let origin = caller.map(Self::tap_origin).unwrap_or_default();
        self.taps.event(origin, &e);
    }
}
