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

/// SIOCATMARK (not in the libc crate).
pub const SIOCATMARK: u32 = 0x8905;
/// FIONREAD (SIOCINQ), TIOCOUTQ (SIOCOUTQ), SIOCATMARK.
pub const IOCTLS: [u32; 3] = [libc::FIONREAD as u32, libc::TIOCOUTQ as u32, SIOCATMARK];

/// AUDIT_ARCH_X86_64 (EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE).
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// x32 system calls have this bit in their number.
const X32_BIT: u32 = 0x4000_0000;

// struct seccomp_data: nr at 0, arch at 4, args from 16 (the low word of
// args[1] at 24 on this little-endian ABI).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG1: u32 = 24;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

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
/// mount too (servers unlink a stale socket before they bind it again).
pub const UNLINK: &[i64] = &[libc::SYS_unlink, libc::SYS_unlinkat];

/// The program: other ABIs (i386 through int 0x80, x32) run unsupervised,
/// a limit the README states; on x86_64 each trapped number notifies.
pub fn program(unlink: bool) -> Vec<sock_filter> {
    let calls: Vec<i64> = TRAPPED
        .iter()
        .chain(if unlink { UNLINK } else { &[] })
        .copied()
        .collect();
    let n = calls.len() as u8;
    // Layout: 0 load arch, 1 test it, 2 load nr, 3 test x32, 4.. one
    // compare per call, 4+n ioctl?, 5+n load its request, 6+n.. one compare
    // per request, then allow, then notify. Offsets count from the next
    // instruction.
    let allow = 9 + n;
    let notify = 10 + n;
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_X86_64, 0, allow - 2),
        stmt(LD_W_ABS, OFF_NR),
        jump(JGE_K, X32_BIT, allow - 4, 0),
    ];
    for (i, &nr) in calls.iter().enumerate() {
        p.push(jump(JEQ_K, nr as u32, notify - 5 - i as u8, 0));
    }
    p.push(jump(JEQ_K, libc::SYS_ioctl as u32, 0, allow - 5 - n));
    p.push(stmt(LD_W_ABS, OFF_ARG1));
    for (i, &req) in IOCTLS.iter().enumerate() {
        p.push(jump(JEQ_K, req, notify - 7 - n - i as u8, 0));
    }
    p.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF));
    debug_assert_eq!(p.len(), notify as usize + 1);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on one (arch, nr) as the kernel would.
    fn eval(p: &[sock_filter], arch: u32, nr: u32) -> u32 {
        eval_ioctl(p, arch, nr, 0)
    }

    fn eval_ioctl(p: &[sock_filter], arch: u32, nr: u32, req: u32) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            match i.code {
                LD_W_ABS => {
                    acc = match i.k {
                        OFF_ARCH => arch,
                        OFF_NR => nr,
                        OFF_ARG1 => req,
                        k => panic!("load at {k}"),
                    }
                }
                JEQ_K | JGE_K => {
                    let hit = if i.code == JEQ_K {
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

    #[test]
    fn socket_calls_notify_and_the_rest_runs() {
        let p = program(false);
        let with_unlink = program(true);
        // What each program does with an x86-64 system call.
        let x86 = |prog: &[sock_filter], nr: i64| eval(prog, AUDIT_ARCH_X86_64, nr as u32);
        for &nr in UNLINK {
            assert_eq!(x86(&p, nr), libc::SECCOMP_RET_ALLOW);
            assert_eq!(x86(&with_unlink, nr), libc::SECCOMP_RET_USER_NOTIF);
        }
        for &nr in TRAPPED {
            assert_eq!(x86(&with_unlink, nr), libc::SECCOMP_RET_USER_NOTIF);
            assert_eq!(x86(&p, nr), libc::SECCOMP_RET_USER_NOTIF);
        }
        for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_ioctl, 0, 1000] {
            assert_eq!(x86(&p, nr), libc::SECCOMP_RET_ALLOW);
        }
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
}
