//! The seccomp filter: the socket calls go to the supervisor
//! (SECCOMP_RET_USER_NOTIF), everything else runs. Hand-written classic BPF
//! for a fixed list: a compare per call, no crate needed.

use libc::sock_filter;

/// The calls the supervisor sees (x86_64 numbers), and ioctl with one of
/// `IOCTLS` (the socket queries a udsfs data file cannot answer itself).
pub const TRAPPED: &[i64] = &[
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_getsockopt,
    libc::SYS_setsockopt,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_shutdown,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    // A udsfs socket's fstat says S_IFSOCK (stat.rs).
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
];

/// Calls no supervisor can carry, trapped in every program to be refused
/// with ENOSYS and a line naming them (`refuse`): io_uring's socket
/// operations (IORING_OP_SOCKET, CONNECT, SENDMSG...) run in the kernel
/// past any filter, so a ring would make kernel sockets inside the mount.
/// A program that finds no io_uring uses the plain calls.
pub const REFUSED: &[i64] = &[libc::SYS_io_uring_setup];

/// The answer to a `REFUSED` call of thread `tid`: ENOSYS, said on the
/// run's standard error at most once a second (a program may retry at will).
pub fn refuse(tid: i32, nr: i64) -> i32 {
    static LIMIT: crate::engine::log_limit::LogLimit = crate::engine::log_limit::LogLimit::new();
    if let Some(skipped) = LIMIT.admit() {
        let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).unwrap_or_default();
        let more = if skipped > 0 {
            format!(" ({skipped} more such lines left out)")
        } else {
            String::new()
        };
        eprintln!(
            "udsfs run: thread {tid} ({}): io_uring_setup (system call {nr}) refused with ENOSYS: \
             io_uring's socket operations cannot be carried by udsfs{more}",
            comm.trim_end()
        );
    }
    libc::ENOSYS
}

/// FIONREAD (SIOCINQ), TIOCOUTQ (SIOCOUTQ), and those about O_ASYNC, the
/// owner and the OOB mark (`udsfs_calls::sigio::IOCTLS`: FIOASYNC,
/// FIOSETOWN, SIOCSPGRP, FIOGETOWN, SIOCGPGRP, SIOCATMARK), which a FUSE
/// file refuses (fcntl.rs).
pub const IOCTLS: [u32; 8] = {
    use udsfs_calls::sigio::*;
    [
        libc::FIONREAD as u32,
        libc::TIOCOUTQ as u32,
        SIOCATMARK,
        FIOASYNC,
        FIOSETOWN,
        SIOCSPGRP,
        FIOGETOWN,
        SIOCGPGRP,
    ]
};

/// fcntl with one of these commands, for `Kind::Supervised` (fcntl.rs;
/// `udsfs_calls::sigio::FCNTLS`): the commands with a part in the daemon.
/// The rest (F_GETFD, F_SETFD, F_DUPFD, the owner's reads, F_SETSIG...) run
/// without a notification. Under the library they all run: the library
/// carries the program's fcntl (preload/src/urg.rs), and a trap would cost
/// a notification for each F_GETFL the C library makes itself (fdopen).
pub const FCNTLS: [i32; 4] = udsfs_calls::sigio::FCNTLS;

/// AUDIT_ARCH_X86_64 (EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE).
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// x32 system calls have this bit in their number.
const X32_BIT: u32 = 0x4000_0000;

// struct seccomp_data: nr at 0, arch at 4, args from 16 (the low word of
// args[1] at 24 on this little-endian ABI).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG1: u32 = 24;
const OFF_ARG2: u32 = 32;
const OFF_ARG3: u32 = 40;
// instruction_pointer at 8, its low word first.
const OFF_IP_LO: u32 = 8;
const OFF_IP_HI: u32 = 12;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// With `--route` prefixes: unlink of a routed name removes its node in the
/// mount too (servers unlink a stale socket before they bind it again),
/// link gives the node a second name, rename moves it along and rmdir of a
/// routed directory removes its copy in the mount (routed.rs).
pub const ROUTED: &[i64] = &[
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_rmdir,
];

/// With `--route` prefixes, for a tree the supervisor alone carries: lstat
/// (the system call the C library's __lxstat makes) of the link a routed
/// bind made shows its node, a socket (stat.rs). The library answers its
/// own programs' (preload/src/routed.rs `fix_link`).
pub const ROUTED_STAT: &[i64] = &[libc::SYS_lstat];

/// The stat calls the C library makes (fstat, stat and lstat are
/// newfstatat since glibc 2.33; statx), with the argument that holds their
/// flags: under the library only those that name a file by descriptor
/// (AT_EMPTY_PATH) are trapped, and only from outside the gadget page (a
/// udsfs socket's fstat says S_IFSOCK: stat.rs); plain fstat, which Go
/// makes, is trapped wherever made.
const STATS: &[(i64, u32)] = &[
    (libc::SYS_newfstatat, OFF_ARG3),
    (libc::SYS_statx, OFF_ARG2),
];

fn is_stat(nr: i64) -> bool {
    STATS.iter().any(|&(n, _)| n == nr)
}

/// Which program: `Supervised`, for a tree the supervisor alone carries
/// (`--front seccomp`, a static binary exec'd in place), with `routed` for
/// `--route` prefixes (`ROUTED`, `ROUTED_STAT`); `Library`, for a tree under the preload library:
/// the socket calls made from the library's gadget page
/// (`udsfs_proto::gadget`) run, the rest go to the supervisor (`ROUTED`
/// too with `--route` prefixes). Of `STATS` only the calls by descriptor
/// (AT_EMPTY_PATH) are trapped there: the library makes its programs' by
/// descriptor from the gadget, and trapping stat by path (the dynamic
/// loader's, every `ls`) would cost a notification each; what is trapped
/// is the dynamic loader's fstat of each library it maps, the C library's
/// own (stdio's first look at a descriptor) and those of programs without
/// the library (a child exec'd with an empty environment: systemd's
/// socket activation hands `cat` a udsfs socket as stdin and stdout).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Supervised { routed: bool },
    Library { routed: bool },
}

/// Jump targets of `Asm`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    Allow,
    Notify,
    /// The gadget check (`Kind::Library`), or notify.
    Trap,
    /// Past this many instructions after the next.
    Skip(usize),
}

/// A program with symbolic jump targets, resolved by `done`.
struct Asm {
    code: Vec<(sock_filter, To, To)>,
}

impl Asm {
    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push((stmt(code, k), To::Next, To::Next));
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) {
        self.code.push((jump(code, k, 0, 0), jt, jf));
    }

    /// Traps when argument `off` (loaded first) is one of `values`, else
    /// allows: one compare each.
    fn trap_if_arg_in(&mut self, off: u32, values: impl ExactSizeIterator<Item = u32>) {
        self.stmt(LD_W_ABS, off);
        let last = values.len().saturating_sub(1);
        for (i, v) in values.enumerate() {
            let miss = if i == last { To::Allow } else { To::Next };
            self.jump(JEQ_K, v, To::Trap, miss);
        }
    }

    /// Resolves the targets: `labels` gives each one's index.
    fn done(self, labels: impl Fn(To) -> usize) -> Vec<sock_filter> {
        let mut out = Vec::with_capacity(self.code.len());
        for (i, (mut ins, jt, jf)) in self.code.into_iter().enumerate() {
            let off = |t: To| match t {
                To::Next => 0,
                To::Skip(n) => u8::try_from(n).expect("a short skip"),
                t => {
                    let d = labels(t)
                        .checked_sub(i + 1)
                        .expect("a filter jump backwards");
                    u8::try_from(d).expect("a filter jump past 255 instructions")
                }
            };
            ins.jt = off(jt);
            ins.jf = off(jf);
            out.push(ins);
        }
        out
    }
}

/// The program: other ABIs (i386 through int 0x80, x32) run unsupervised,
/// a limit the README states; on x86_64 each trapped number notifies (from
/// outside the gadget page, for `Kind::Library`).
pub fn program(kind: Kind) -> Vec<sock_filter> {
    let calls: Vec<i64> = match kind {
        Kind::Supervised { routed } => TRAPPED
            .iter()
            .chain(if routed { ROUTED } else { &[] })
            .chain(if routed { ROUTED_STAT } else { &[] })
            .copied()
            .collect(),
        Kind::Library { routed } => TRAPPED
            .iter()
            .filter(|&&nr| !is_stat(nr))
            .chain(if routed { ROUTED } else { &[] })
            .copied()
            .collect(),
    };
    let mut a = Asm { code: Vec::new() };
    a.stmt(LD_W_ABS, OFF_ARCH);
    a.jump(JEQ_K, AUDIT_ARCH_X86_64, To::Next, To::Allow);
    a.stmt(LD_W_ABS, OFF_NR);
    a.jump(JGE_K, X32_BIT, To::Allow, To::Next);
    for &nr in &calls {
        a.jump(JEQ_K, nr as u32, To::Trap, To::Next);
    }
    if matches!(kind, Kind::Library { .. }) {
        // A stat by descriptor traps; by path it runs. The accumulator then
        // holds the flags: both ways leave this block.
        for &(nr, flags) in STATS {
            a.jump(JEQ_K, nr as u32, To::Next, To::Skip(2));
            a.stmt(LD_W_ABS, flags);
            a.jump(JSET_K, libc::AT_EMPTY_PATH as u32, To::Trap, To::Allow);
        }
    }
    // Refused wherever made, the library's syscall() included.
    for &nr in REFUSED {
        a.jump(JEQ_K, nr as u32, To::Notify, To::Next);
    }
    if matches!(kind, Kind::Supervised { .. }) {
        // fcntl: its command (args[1]) decides; past the block when not it.
        a.jump(
            JEQ_K,
            libc::SYS_fcntl as u32,
            To::Next,
            To::Skip(1 + FCNTLS.len()),
        );
        a.trap_if_arg_in(OFF_ARG1, FCNTLS.iter().map(|&c| c as u32));
        // write of nothing: Linux sends it on a socket (a zero-length
        // datagram; EPIPE at a closed peer), where FUSE answers 0 and passes
        // nothing on. The count's low word only: the supervisor lets a
        // longer one run (emulate.rs `triage`).
        a.jump(JEQ_K, libc::SYS_write as u32, To::Next, To::Skip(2));
        a.stmt(LD_W_ABS, OFF_ARG2);
        a.jump(JEQ_K, 0, To::Trap, To::Allow);
    }
    a.jump(JEQ_K, libc::SYS_ioctl as u32, To::Next, To::Allow);
    a.trap_if_arg_in(OFF_ARG1, IOCTLS.iter().copied());
    let allow = a.code.len();
    a.stmt(RET_K, libc::SECCOMP_RET_ALLOW);
    let trap = a.code.len();
    if matches!(kind, Kind::Library { .. }) {
        use udsfs_proto::gadget::{ADDR, LEN};
        a.stmt(LD_W_ABS, OFF_IP_HI);
        a.jump(JEQ_K, (ADDR >> 32) as u32, To::Next, To::Notify);
        a.stmt(LD_W_ABS, OFF_IP_LO);
        a.stmt(AND_K, !(LEN as u32 - 1));
        a.jump(JEQ_K, ADDR as u32, To::Next, To::Notify);
        // Classic BPF jumps forward only: an allow of its own.
        a.stmt(RET_K, libc::SECCOMP_RET_ALLOW);
    }
    let notify = a.code.len();
    a.stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF);
    a.done(|t| match t {
        To::Allow => allow,
        To::Trap => trap,
        To::Notify => notify,
        To::Next | To::Skip(_) => unreachable!(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use udsfs_proto::gadget::ADDR;

    /// What the kernel would see: arch, nr, ioctl request, instruction pointer.
    struct Data {
        arch: u32,
        nr: u32,
        req: u32,
        ip: u64,
        /// args[2] and args[3] (a stat call's flags).
        arg2: u32,
        arg3: u32,
    }

    /// Runs the program on `d` as the kernel would.
    fn run(p: &[sock_filter], d: &Data) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            match i.code {
                LD_W_ABS => {
                    acc = match i.k {
                        OFF_ARCH => d.arch,
                        OFF_NR => d.nr,
                        OFF_ARG1 => d.req,
                        OFF_ARG2 => d.arg2,
                        OFF_ARG3 => d.arg3,
                        OFF_IP_LO => d.ip as u32,
                        OFF_IP_HI => (d.ip >> 32) as u32,
                        k => panic!("load at {k}"),
                    }
                }
                AND_K => acc &= i.k,
                JEQ_K | JGE_K | JSET_K => {
                    let hit = if i.code == JSET_K {
                        acc & i.k != 0
                    } else if i.code == JEQ_K {
                        acc == i.k
                    } else {
                        acc >= i.k
                    };
                    pc += if hit { i.jt } else { i.jf } as usize;
                }
                RET_K => return i.k,
                c => panic!("unexpected opcode {c}"),
            }
            pc += 1;
        }
    }

    fn eval(p: &[sock_filter], arch: u32, nr: u32) -> u32 {
        eval_ioctl(p, arch, nr, 0)
    }

    fn eval_ioctl(p: &[sock_filter], arch: u32, nr: u32, req: u32) -> u32 {
        run(
            p,
            &Data {
                arch,
                nr,
                req,
                ip: 0x7f12_3456_7000,
                arg2: 0,
                arg3: 0,
            },
        )
    }

    #[test]
    fn socket_calls_notify_and_the_rest_runs() {
        let p = program(Kind::Supervised { routed: false });
        let with_routes = program(Kind::Supervised { routed: true });
        // What each program does with an x86-64 system call.
        let x86 = |prog: &[sock_filter], nr: i64| eval(prog, AUDIT_ARCH_X86_64, nr as u32);
        for &nr in ROUTED.iter().chain(ROUTED_STAT) {
            assert_eq!(x86(&p, nr), libc::SECCOMP_RET_ALLOW);
            assert_eq!(x86(&with_routes, nr), libc::SECCOMP_RET_USER_NOTIF);
        }
        for &nr in TRAPPED {
            assert_eq!(x86(&with_routes, nr), libc::SECCOMP_RET_USER_NOTIF);
            assert_eq!(x86(&p, nr), libc::SECCOMP_RET_USER_NOTIF);
        }
        for nr in [libc::SYS_read, libc::SYS_ioctl, 0, 1000] {
            assert_eq!(x86(&p, nr), libc::SECCOMP_RET_ALLOW);
        }
        // write: of nothing only (the count, args[2]).
        let write = |prog: &[sock_filter], count: u32| {
            run(
                prog,
                &Data {
                    arch: AUDIT_ARCH_X86_64,
                    nr: libc::SYS_write as u32,
                    req: 0,
                    ip: 0x7f12_3456_7000,
                    arg2: count,
                    arg3: 0,
                },
            )
        };
        assert_eq!(write(&p, 0), libc::SECCOMP_RET_USER_NOTIF);
        for count in [1, 100, u32::MAX] {
            assert_eq!(write(&p, count), libc::SECCOMP_RET_ALLOW, "count {count}");
        }
        let lib = program(Kind::Library { routed: false });
        assert_eq!(write(&lib, 0), libc::SECCOMP_RET_ALLOW);
        assert_eq!(
            eval(&p, AUDIT_ARCH_X86_64, X32_BIT | libc::SYS_connect as u32),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(eval(&p, 0x4000_0003, 102), libc::SECCOMP_RET_ALLOW);
        let ioctl = libc::SYS_ioctl as u32;
        for req in IOCTLS {
            assert_eq!(
                eval_ioctl(&p, AUDIT_ARCH_X86_64, ioctl, req),
                libc::SECCOMP_RET_USER_NOTIF
            );
        }
        for req in [libc::TCGETS as u32, libc::FIONBIO as u32, 0] {
            assert_eq!(
                eval_ioctl(&p, AUDIT_ARCH_X86_64, ioctl, req),
                libc::SECCOMP_RET_ALLOW
            );
        }
    }

    /// fcntl notifies only with a command that has a part in the daemon
    /// (F_GETFL, F_SETFL, F_SETOWN, F_SETOWN_EX), and only in a supervised
    /// tree: the common ones (F_GETFD, F_SETFD, F_DUPFD...) and the owner's
    /// reads cost nothing; under the library none is trapped.
    #[test]
    fn fcntl_notifies_only_for_its_commands() {
        use udsfs_calls::sigio::{F_GETOWN_EX, F_GETSIG, F_SETOWN_EX, F_SETSIG};
        let fcntl = libc::SYS_fcntl as u32;
        for routed in [false, true] {
            let sup = program(Kind::Supervised { routed });
            let lib = program(Kind::Library { routed });
            for cmd in [libc::F_GETFL, libc::F_SETFL, libc::F_SETOWN, F_SETOWN_EX] {
                let got = eval_ioctl(&sup, AUDIT_ARCH_X86_64, fcntl, cmd as u32);
                println!("supervised fcntl cmd {cmd}: {got:#x}");
                assert_eq!(got, libc::SECCOMP_RET_USER_NOTIF);
                let got = eval_ioctl(&lib, AUDIT_ARCH_X86_64, fcntl, cmd as u32);
                assert_eq!(got, libc::SECCOMP_RET_ALLOW);
            }
            let plain = [
                libc::F_GETFD,
                libc::F_SETFD,
                libc::F_DUPFD,
                libc::F_DUPFD_CLOEXEC,
                libc::F_GETOWN,
                F_GETOWN_EX,
                F_SETSIG,
                F_GETSIG,
                libc::F_SETLK,
                libc::F_ADD_SEALS,
            ];
            for cmd in plain {
                let got = eval_ioctl(&sup, AUDIT_ARCH_X86_64, fcntl, cmd as u32);
                println!("supervised fcntl cmd {cmd}: {got:#x}");
                assert_eq!(got, libc::SECCOMP_RET_ALLOW);
            }
            // The command's number in another call's argument traps nothing.
            for nr in [libc::SYS_read, libc::SYS_dup3] {
                let got = eval_ioctl(&sup, AUDIT_ARCH_X86_64, nr as u32, libc::F_SETFL as u32);
                assert_eq!(got, libc::SECCOMP_RET_ALLOW);
            }
        }
    }

    /// Under the library: a socket call from the gadget page runs, the same
    /// call from anywhere else (one byte before or after the page, the same
    /// offset in another 4 GiB) notifies; newfstatat and statx run, unlink,
    /// rename and the rest of `ROUTED` too unless there are routes, lstat
    /// always (the library answers it).
    #[test]
    fn the_gadget_page_runs_and_the_rest_traps() {
        let p = program(Kind::Library { routed: false });
        let routed = program(Kind::Library { routed: true });
        let at = |nr: i64, req: u32, ip: u64| {
            run(
                &p,
                &Data {
                    arch: AUDIT_ARCH_X86_64,
                    nr: nr as u32,
                    req,
                    ip,
                    arg2: 0,
                    arg3: 0,
                },
            )
        };
        let inside = [ADDR, ADDR + 0x19, ADDR + 4095];
        let outside = [ADDR - 1, ADDR + 4096, ADDR + (1 << 32), ADDR ^ (1 << 40), 0];
        for &nr in TRAPPED.iter().filter(|&&nr| !is_stat(nr)) {
            for ip in inside {
                assert_eq!(at(nr, 0, ip), libc::SECCOMP_RET_ALLOW, "{nr} at {ip:#x}");
            }
            for ip in outside {
                assert_eq!(
                    at(nr, 0, ip),
                    libc::SECCOMP_RET_USER_NOTIF,
                    "{nr} at {ip:#x}"
                );
            }
        }
        for &nr in ROUTED {
            assert_eq!(at(nr, 0, ADDR - 1), libc::SECCOMP_RET_ALLOW);
        }
        // A stat by path runs wherever made; by descriptor (AT_EMPTY_PATH in
        // its own flags argument, not the other's) it traps but from the
        // gadget page.
        let stat = |nr: i64, arg2: u32, arg3: u32, ip: u64| {
            let d = Data {
                arch: AUDIT_ARCH_X86_64,
                nr: nr as u32,
                req: 0,
                ip,
                arg2,
                arg3,
            };
            run(&p, &d)
        };
        let empty = libc::AT_EMPTY_PATH as u32;
        let nofollow = libc::AT_SYMLINK_NOFOLLOW as u32;
        for ip in outside {
            let notify = libc::SECCOMP_RET_USER_NOTIF;
            assert_eq!(stat(libc::SYS_newfstatat, 0, empty | nofollow, ip), notify);
            assert_eq!(stat(libc::SYS_statx, empty, 0, ip), notify);
            let allow = libc::SECCOMP_RET_ALLOW;
            assert_eq!(stat(libc::SYS_newfstatat, empty, nofollow, ip), allow);
            assert_eq!(stat(libc::SYS_statx, 0, empty, ip), allow);
            assert_eq!(stat(libc::SYS_newfstatat, 0, 0, ip), allow);
        }
        for ip in inside {
            assert_eq!(
                stat(libc::SYS_newfstatat, 0, empty, ip),
                libc::SECCOMP_RET_ALLOW
            );
            assert_eq!(stat(libc::SYS_statx, empty, 0, ip), libc::SECCOMP_RET_ALLOW);
        }
        for &nr in ROUTED {
            let r = |ip| {
                run(
                    &routed,
                    &Data {
                        arch: AUDIT_ARCH_X86_64,
                        nr: nr as u32,
                        req: 0,
                        ip,
                        arg2: 0,
                        arg3: 0,
                    },
                )
            };
            assert_eq!(r(ADDR - 1), libc::SECCOMP_RET_USER_NOTIF);
            assert_eq!(r(ADDR + 0x19), libc::SECCOMP_RET_ALLOW);
        }
        for &nr in ROUTED_STAT {
            let lstat = eval(&routed, AUDIT_ARCH_X86_64, nr as u32);
            assert_eq!(lstat, libc::SECCOMP_RET_ALLOW);
        }
        assert_eq!(
            at(libc::SYS_fstat, 0, ADDR - 1),
            libc::SECCOMP_RET_USER_NOTIF
        );
        let full = program(Kind::Supervised { routed: false });
        for &nr in REFUSED {
            assert_eq!(at(nr, 0, 0x1000), libc::SECCOMP_RET_USER_NOTIF);
            assert_eq!(at(nr, 0, ADDR + 0x19), libc::SECCOMP_RET_USER_NOTIF);
            let n = nr as u32;
            assert_eq!(
                eval(&full, AUDIT_ARCH_X86_64, n),
                libc::SECCOMP_RET_USER_NOTIF
            );
        }
        for req in IOCTLS {
            assert_eq!(
                at(libc::SYS_ioctl, req, ADDR + 0x19),
                libc::SECCOMP_RET_ALLOW
            );
            assert_eq!(
                at(libc::SYS_ioctl, req, 0x1000),
                libc::SECCOMP_RET_USER_NOTIF
            );
        }
        assert_eq!(at(libc::SYS_read, 0, 0x1000), libc::SECCOMP_RET_ALLOW);
    }
}
