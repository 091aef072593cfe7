//! O_ASYNC and the SIGIO/SIGURG owner of a udsfs socket, decided once for
//! both fronts: which fcntl commands and ioctl requests are about them,
//! the answer to each, and what the conversion of a kernel socket carries.
//!
//! The kernel keeps the owner (F_SETOWN, F_SETOWN_EX) and F_SETSIG's signal
//! on every file, a FUSE file too, so F_GETOWN, F_GETOWN_EX and F_GETSIG
//! are the kernel's to answer; but it never signals for a FUSE file (no
//! `fasync`): the daemon is told the owner (`Op::SetOwner`, a pid of the
//! caller's pid namespace, which the daemon maps: src/engine/pidns.rs) and
//! keeps O_ASYNC (`Op::SetAsync`), which F_SETFL accepts on such a file but
//! does not keep and FIOASYNC refuses (ENOTTY): F_GETFL shows it from the
//! daemon, as Linux does. The socket ioctls FIOSETOWN, SIOCSPGRP,
//! FIOGETOWN, SIOCGPGRP and SIOCATMARK reach no socket code for a FUSE file
//! and are answered here.
//!
//! The front says how the program is reached (`Program`: its memory, and
//! how a pid of the program's namespace is named on the descriptor the
//! front holds); the descriptor `fd` is the program's own (the library) or
//! a pidfd_getfd copy of it (the supervisor): the same open file either way.

use udsfs_proto::Res;
use udsfs_proto::ioctl::{AtMark, OobOpts, Op};

use crate::client;

/// The socket ioctls about owners, O_ASYNC and the OOB mark.
pub const FIOSETOWN: u32 = 0x8901;
pub const SIOCSPGRP: u32 = 0x8902;
pub const FIOGETOWN: u32 = 0x8903;
pub const SIOCGPGRP: u32 = 0x8904;
pub const SIOCATMARK: u32 = 0x8905;
pub const FIOASYNC: u32 = 0x5452;
/// Every request `ioctl` answers.
pub const IOCTLS: [u32; 6] = [
    FIOSETOWN, SIOCSPGRP, FIOGETOWN, SIOCGPGRP, SIOCATMARK, FIOASYNC,
];

/// Not in the libc crate: <fcntl.h>'s owner commands and kinds.
pub const F_SETSIG: i32 = 10;
pub const F_GETSIG: i32 = 11;
pub const F_SETOWN_EX: i32 = 15;
pub const F_GETOWN_EX: i32 = 16;
pub const F_OWNER_TID: i32 = 0;
pub const F_OWNER_PID: i32 = 1;
pub const F_OWNER_PGRP: i32 = 2;

/// The fcntl commands with a part in the daemon (`fcntl_part`); the rest
/// (F_GETOWN, F_GETOWN_EX, F_SETSIG, F_GETSIG, F_GETFD, F_DUPFD...) are
/// the kernel's alone.
pub const FCNTLS: [i32; 4] = [libc::F_GETFL, libc::F_SETFL, libc::F_SETOWN, F_SETOWN_EX];

/// How the front reaches the program.
pub trait Program {
    /// The int at `addr` (EFAULT when it cannot be read).
    fn read_int(&self, addr: u64) -> Res<i32>;
    /// The int at `addr` written.
    fn write_int(&self, addr: u64, v: i32) -> Res<()>;
    /// Owner `target` (a pid, or minus a process group) of the program's
    /// pid namespace, as the front names it in a fcntl of its own (ESRCH:
    /// it cannot be named there).
    fn owner_to_front(&self, target: i32) -> Res<i32>;
    /// An owner the front's fcntl read, as the program names it (0: one
    /// the program cannot see).
    fn owner_to_program(&self, owner: i32) -> i32;
}

/// One fcntl made by the front itself on `fd` (a system call: the library
/// defines fcntl); the errno when it fails.
pub fn kernel_fcntl(fd: i32, cmd: i32, arg: u64) -> Res<i32> {
    // SAFETY: fcntl with an int or a pointer the caller vouches for.
    let r = unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, arg) };
    if r < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(r as i32)
    }
}

/// The owner a `struct f_owner_ex` names, as Linux keeps it for SIGIO and
/// SIGURG: a thread (F_OWNER_TID) as its process (the daemon signals
/// processes), a process group as minus its id; EINVAL for another kind
/// (f_setown_ex).
pub fn owner_ex(kind: i32, pid: i32) -> Res<i32> {
    match kind {
        F_OWNER_TID | F_OWNER_PID => Ok(pid),
        F_OWNER_PGRP => Ok(-pid),
        _ => Err(libc::EINVAL),
    }
}

/// What a fcntl command of the program on a udsfs socket asks of the
/// daemon besides the kernel's own fcntl on the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// None: the kernel's answer is the answer.
    Kernel,
    /// F_GETFL: the kernel's flags with O_ASYNC as the daemon keeps it
    /// (`with_async`).
    GetFl,
    /// F_SETFL: O_ASYNC on or off in the daemon.
    SetAsync(bool),
    /// F_SETOWN, F_SETOWN_EX: the owner, as the program names it.
    SetOwner(i32),
}

/// The daemon's part of fcntl(`cmd`, `arg`): F_SETOWN_EX's struct is read
/// from the program (EFAULT, EINVAL for an unknown kind: Linux's answers,
/// before anything is changed).
pub fn fcntl_part(cmd: i32, arg: u64, prog: &impl Program) -> Res<Part> {
    Ok(match cmd {
        libc::F_GETFL => Part::GetFl,
        libc::F_SETFL => Part::SetAsync(arg as i32 & libc::O_ASYNC != 0),
        libc::F_SETOWN => Part::SetOwner(arg as i32),
        F_SETOWN_EX => {
            let kind = prog.read_int(arg)?;
            let pid = prog.read_int(arg.wrapping_add(4))?;
            Part::SetOwner(owner_ex(kind, pid)?)
        }
        _ => Part::Kernel,
    })
}

/// Does the daemon's part of `part` on udsfs socket `fd`; `kernel` is
/// the result of the kernel's fcntl (the flags for F_GETFL), for the front
/// that made it first (the library), or 0 for one whose kernel call comes
/// after (the supervisor continues the program's own call: its result is
/// the answer then, and F_GETFL is made by the front first).
pub fn daemon_part(fd: i32, part: Part, kernel: i32) -> Res<i32> {
    match part {
        Part::Kernel => Ok(kernel),
        Part::GetFl => Ok(with_async(fd, kernel)),
        Part::SetAsync(on) => set_async(fd, on).map(|()| kernel),
        Part::SetOwner(target) => tell_owner(fd, target).map(|()| kernel),
    }
}

/// O_ASYNC on or off on udsfs socket `fd` (FIOASYNC, F_SETFL, a converted
/// socket's), kept by the daemon, which sends SIGIO to the owner.
pub fn set_async(fd: i32, on: bool) -> Res<()> {
    client::op(fd, Op::SetAsync, on as i32).map(|_| ())
}

/// The daemon told owner `target` (of the caller's pid namespace; 0 none):
/// the caller must be the program's thread as the daemon sees it (the
/// supervisor's grant), whose pid namespace and user decide.
fn tell_owner(fd: i32, target: i32) -> Res<()> {
    client::op(fd, Op::SetOwner, target).map(|_| ())
}

/// F_GETFL's flags `fl` of udsfs socket `fd` with O_ASYNC as the daemon
/// keeps it.
pub fn with_async(fd: i32, fl: i32) -> i32 {
    let on = client::op(fd, Op::OobOpts, 0).is_ok_and(|c| c.values::<OobOpts>().fasync);
    if on {
        fl | libc::O_ASYNC
    } else {
        fl & !libc::O_ASYNC
    }
}

/// The owner set on the file (as the kernel checks it: ESRCH for none such)
/// and then in the daemon: FIOSETOWN, SIOCSPGRP, the library's F_SETOWN.
pub fn set_owner(fd: i32, target: i32, prog: &impl Program) -> Res<()> {
    let own = prog.owner_to_front(target)?;
    kernel_fcntl(fd, libc::F_SETOWN, own as i64 as u64)?;
    tell_owner(fd, target)
}

/// ioctl(`req`, `arg`) of the program on udsfs socket `fd`, when `req` is
/// one of `IOCTLS` (None: not one of them). The argument is the program's
/// int: EFAULT when it cannot be read or written.
pub fn ioctl(fd: i32, req: u32, arg: u64, prog: &impl Program) -> Option<Res<()>> {
    Some(match req {
        FIOSETOWN | SIOCSPGRP => prog.read_int(arg).and_then(|t| set_owner(fd, t, prog)),
        FIOGETOWN | SIOCGPGRP => kernel_fcntl(fd, libc::F_GETOWN, 0)
            .and_then(|o| prog.write_int(arg, prog.owner_to_program(o))),
        FIOASYNC => prog.read_int(arg).and_then(|on| set_async(fd, on != 0)),
        SIOCATMARK => client::op(fd, Op::AtMark, 0)
            .and_then(|c| prog.write_int(arg, c.values::<AtMark>().at as i32)),
        _ => return None,
    })
}

/// What a kernel socket's conversion carries of this (the rest is
/// `udsfs_proto::carry`'s): O_ASYNC, the owner with its kind (F_GETOWN_EX,
/// as the front names it) and F_SETSIG's signal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carry {
    pub fasync: bool,
    /// (kind, pid) as F_GETOWN_EX reads it; pid 0: no owner.
    pub owner: (i32, i32),
    pub sig: i32,
}

impl Carry {
    /// Read from kernel socket `fd` before it goes.
    pub fn of(fd: i32) -> Carry {
        let mut ex = [0i32; 2];
        let owner = match kernel_fcntl(fd, F_GETOWN_EX, ex.as_mut_ptr() as u64) {
            Ok(_) => (ex[0], ex[1]),
            Err(_) => (F_OWNER_PID, 0),
        };
        Carry {
            fasync: kernel_fcntl(fd, libc::F_GETFL, 0).is_ok_and(|f| f & libc::O_ASYNC != 0),
            owner,
            sig: kernel_fcntl(fd, F_GETSIG, 0).unwrap_or(0),
        }
    }

    /// Put on udsfs socket `fd` (which now holds the kernel socket's
    /// place): the owner and signal on the file, O_ASYNC and the owner in
    /// the daemon (the owner as the program names it: `prog`).
    pub fn apply(&self, fd: i32, prog: &impl Program) -> Res<()> {
        let (kind, pid) = self.owner;
        if pid != 0 {
            let ex = [kind, pid];
            kernel_fcntl(fd, F_SETOWN_EX, ex.as_ptr() as u64)?;
            let target = owner_ex(kind, prog.owner_to_program(pid))?;
            if target != 0 {
                tell_owner(fd, target)?;
            }
        }
        if self.sig != 0 {
            kernel_fcntl(fd, F_SETSIG, self.sig as u64)?;
        }
        if self.fasync {
            set_async(fd, true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Prog(Vec<i32>);

    impl Program for Prog {
        fn read_int(&self, addr: u64) -> Res<i32> {
            self.0.get(addr as usize / 4).copied().ok_or(libc::EFAULT)
        }
        fn write_int(&self, _: u64, _: i32) -> Res<()> {
            Err(libc::EFAULT)
        }
        fn owner_to_front(&self, t: i32) -> Res<i32> {
            Ok(t)
        }
        fn owner_to_program(&self, o: i32) -> i32 {
            o
        }
    }

    #[test]
    fn which_fcntls_ask_the_daemon_and_what() {
        let p = Prog(vec![F_OWNER_PGRP, 42, 7, 9]);
        let cases = [
            (libc::F_GETFL, 0, Ok(Part::GetFl)),
            (
                libc::F_SETFL,
                libc::O_NONBLOCK as u64,
                Ok(Part::SetAsync(false)),
            ),
            (
                libc::F_SETFL,
                (libc::O_ASYNC | 2048) as u64,
                Ok(Part::SetAsync(true)),
            ),
            (libc::F_SETOWN, (-5i64) as u64, Ok(Part::SetOwner(-5))),
            (F_SETOWN_EX, 0, Ok(Part::SetOwner(-42))),
            // A kind Linux does not know (7) is EINVAL; past the memory EFAULT.
            (F_SETOWN_EX, 8, Err(libc::EINVAL)),
            (F_SETOWN_EX, 12, Err(libc::EFAULT)),
            (libc::F_GETOWN, 0, Ok(Part::Kernel)),
            (F_SETSIG, 29, Ok(Part::Kernel)),
            (libc::F_DUPFD_CLOEXEC, 3, Ok(Part::Kernel)),
        ];
        for (cmd, arg, want) in cases {
            let got = fcntl_part(cmd, arg, &p);
            println!("fcntl cmd {cmd} arg {arg:#x}: {got:?}");
            assert_eq!(got, want);
        }
        for cmd in FCNTLS {
            assert_ne!(fcntl_part(cmd, 0, &p), Ok(Part::Kernel), "{cmd}");
        }
        assert_eq!(owner_ex(F_OWNER_TID, 9), Ok(9));
        // Not one of this module's ioctls: None, nothing asked.
        assert!(ioctl(-1, libc::FIONBIO as u32, 0, &p).is_none());
        // FIOASYNC with an unreadable argument: EFAULT before the daemon.
        assert_eq!(ioctl(-1, FIOASYNC, 400, &p), Some(Err(libc::EFAULT)));
    }
}
