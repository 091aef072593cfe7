//! The program's memory, as a system call reaches it: every pointer a
//! program hands a socket call (a msghdr, its iovecs and their buffers,
//! names, control buffers, mmsghdr vectors, option values and lengths) is
//! read and written here, where a fault is EFAULT, as copy_from_user and
//! copy_to_user make it on Linux, and not the program's SIGSEGV.
//!
//! The copy is one `rep movsb` and the probe of a page one `lock or`, at
//! addresses the library knows (x86-64 assembly below). The library's
//! SIGSEGV/SIGBUS trampoline (restart.rs) sees a fault whose instruction is
//! one of them, moves the program counter to the routine's fix-up, which
//! returns what was left, and returns: nothing else runs, and memory that
//! is good costs nothing more than the copy itself.

use crate::errno::Res;

std::arch::global_asm!(
    ".pushsection .text.udsfs_user,\"ax\",@progbits",
    // udsfs_user_copy(dst: rdi, src: rsi, n: rdx) -> rax: bytes not copied.
    ".p2align 4",
    ".globl udsfs_user_copy",
    ".hidden udsfs_user_copy",
    ".type udsfs_user_copy,@function",
    "udsfs_user_copy:",
    "mov rcx, rdx",
    ".globl udsfs_user_copy_insn",
    ".hidden udsfs_user_copy_insn",
    "udsfs_user_copy_insn:",
    "rep movsb",
    "xor eax, eax",
    "ret",
    // A fault at the copy: rcx holds the bytes not copied.
    ".globl udsfs_user_copy_fixup",
    ".hidden udsfs_user_copy_fixup",
    "udsfs_user_copy_fixup:",
    "mov rax, rcx",
    "ret",
    ".size udsfs_user_copy, . - udsfs_user_copy",
    // udsfs_user_probe_write(at: rdi) -> rax: 0 when the byte can be
    // written. `lock or` of 0 writes the byte as it is, atomically: a store
    // another thread makes at the same moment is not undone.
    ".p2align 4",
    ".globl udsfs_user_probe_write",
    ".hidden udsfs_user_probe_write",
    ".type udsfs_user_probe_write,@function",
    "udsfs_user_probe_write:",
    "xor eax, eax",
    ".globl udsfs_user_probe_insn",
    ".hidden udsfs_user_probe_insn",
    "udsfs_user_probe_insn:",
    "lock or byte ptr [rdi], 0",
    "ret",
    ".globl udsfs_user_probe_fixup",
    ".hidden udsfs_user_probe_fixup",
    "udsfs_user_probe_fixup:",
    "mov eax, 1",
    "ret",
    ".size udsfs_user_probe_write, . - udsfs_user_probe_write",
    ".popsection",
);

extern "C" {
    fn udsfs_user_copy(dst: *mut u8, src: *const u8, n: usize) -> usize;
    fn udsfs_user_probe_write(at: *mut u8) -> usize;
    static udsfs_user_copy_insn: u8;
    static udsfs_user_copy_fixup: u8;
    static udsfs_user_probe_insn: u8;
    static udsfs_user_probe_fixup: u8;
}

/// Where a fault at program counter `pc` goes on: the fix-up of the
/// routine whose faulting instruction is at `pc`, or None (not ours).
pub fn fixup_for(pc: usize) -> Option<usize> {
    // Only the addresses of the assembly's labels are taken.
    if pc == std::ptr::addr_of!(udsfs_user_copy_insn) as usize {
        return Some(std::ptr::addr_of!(udsfs_user_copy_fixup) as usize);
    }
    if pc == std::ptr::addr_of!(udsfs_user_probe_insn) as usize {
        return Some(std::ptr::addr_of!(udsfs_user_probe_fixup) as usize);
    }
    None
}

/// Whether a SIGSEGV or SIGBUS was a fault in this module's copy or probe,
/// which then returns EFAULT: the program counter is moved to the fix-up.
/// Only a fault the kernel raised counts (si_code > 0), not a kill().
///
/// # Safety
/// `info` and `ctx` as the kernel passes them to an SA_SIGINFO handler.
pub unsafe fn fix_fault(info: *const libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    if info.is_null() || ctx.is_null() {
        return false;
    }
    // SAFETY: as the caller promised.
    unsafe {
        if (*info).si_code <= 0 {
            return false;
        }
        let uc = &mut *(ctx as *mut libc::ucontext_t);
        let pc = &mut uc.uc_mcontext.gregs[libc::REG_RIP as usize];
        match fixup_for(*pc as usize) {
            Some(to) => {
                *pc = to as i64;
                true
            }
            None => false,
        }
    }
}

/// Copies `n` bytes from `src` to `dst`, either of which may be the
/// program's memory: EFAULT when some cannot be read or written (what
/// came before the fault may have been copied).
///
/// # Safety
/// Memory of this library's own at `dst` or `src` must be valid for `n`
/// bytes; the program's may be anything.
pub unsafe fn copy(dst: *mut u8, src: *const u8, n: usize) -> Res<()> {
    if n == 0 {
        return Ok(());
    }
    if in_page_zero(dst as usize) || in_page_zero(src as usize) {
        // EFAULT without the fault: a fault is handled on the program's
        // SIGSEGV stack, which may be one sigaltstack its threads share
        // (varnishd's: two threads faulting at once each resumed in the
        // other's context). NULL (epoll_ctl, poll, msghdr fields) is the
        // common bad pointer.
        return Err(libc::EFAULT);
    }
    // SAFETY: a fault ends the copy at the fix-up.
    match unsafe { udsfs_user_copy(dst, src, n) } {
        0 => Ok(()),
        _ => Err(libc::EFAULT),
    }
}

/// Reads a `T` of the program's at `p`.
pub fn read<T: Copy>(p: *const T) -> Res<T> {
    let mut v = std::mem::MaybeUninit::<T>::uninit();
    // SAFETY: `v` has room for a T; T is plain data (Copy, C structs).
    unsafe {
        copy(v.as_mut_ptr().cast(), p.cast(), std::mem::size_of::<T>())?;
        Ok(v.assume_init())
    }
}

/// Writes `v` to the program's `p`.
pub fn write<T: Copy>(p: *mut T, v: T) -> Res<()> {
    // SAFETY: reads the local `v`.
    unsafe { copy(p.cast(), (&v as *const T).cast(), std::mem::size_of::<T>()) }
}

/// Reads `dst.len()` bytes of the program's at `src`.
pub fn read_into(dst: &mut [u8], src: *const u8) -> Res<()> {
    // SAFETY: dst is ours.
    unsafe { copy(dst.as_mut_ptr(), src, dst.len()) }
}

/// Writes `src` to the program's `dst`.
pub fn write_from(dst: *mut u8, src: &[u8]) -> Res<()> {
    // SAFETY: src is ours.
    unsafe { copy(dst, src.as_ptr(), src.len()) }
}

const PAGE: usize = 4096;

/// Whether `at` is in the first page, which is never mapped for a program
/// (vm.mmap_min_addr is larger): a sure EFAULT.
fn in_page_zero(at: usize) -> bool {
    at < PAGE
}

/// How many of the `n` bytes at the program's `at` can be read (a page is
/// readable whole or not at all): a byte of each page is read.
pub fn readable(at: *const u8, n: usize) -> usize {
    let start = at as usize;
    let mut p = start;
    let end = start.saturating_add(n);
    let mut byte = 0u8;
    while p < end {
        // SAFETY: one byte into a local.
        if unsafe { copy(&mut byte, p as *const u8, 1) }.is_err() {
            return p - start;
        }
        p = (p / PAGE + 1) * PAGE;
    }
    n
}

/// How many of the `n` bytes at the program's `at` can be written (a page
/// is writable whole or not at all), found without changing them.
pub fn writable(at: *mut u8, n: usize) -> usize {
    let start = at as usize;
    let mut p = start;
    let end = start.saturating_add(n);
    while p < end {
        // SAFETY: a fault ends the probe at the fix-up.
        if in_page_zero(p) || unsafe { udsfs_user_probe_write(p as *mut u8) } != 0 {
            return p - start;
        }
        p = (p / PAGE + 1) * PAGE;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_memory_is_copied() {
        let src = *b"hello";
        let mut dst = [0u8; 5];
        assert_eq!(read_into(&mut dst, src.as_ptr()), Ok(()));
        assert_eq!(&dst, b"hello");
        let v: u64 = read(&7u64).unwrap();
        assert_eq!(v, 7);
        let mut w = 0u32;
        assert_eq!(write(&mut w, 9), Ok(()));
        assert_eq!(w, 9);
        assert_eq!(writable(dst.as_mut_ptr(), 5), 5);
    }

    #[test]
    fn addresses_of_the_routines_are_known() {
        let insn = std::ptr::addr_of!(udsfs_user_copy_insn) as usize;
        assert!(fixup_for(insn).is_some());
        assert!(fixup_for(insn + 1).is_none());
    }
}
