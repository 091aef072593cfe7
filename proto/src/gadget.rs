//! The library's system call gadget: one page of code at a fixed address in
//! every process that carries the preload library (mapped by its
//! constructor, `preload/src/gadget.rs`). The supervisor's filter under the
//! library (`src/supervisor/filter.rs`) lets a socket call whose instruction
//! pointer lies in this page run untrapped: the library has handled it
//! already (its own calls, and its forwarding of calls on kernel sockets).
//! Every other socket call of the tree goes to the supervisor.
//!
//! The address is fixed because the filter is: installed once at the top of
//! a `udsfs run` and inherited across fork and exec, it cannot know where a
//! library was loaded in each process. It lies below where Linux puts
//! mappings with ASLR (the top terabyte or so below the stack) and above
//! the sanitizers' shadow ranges; a process that already has something
//! there makes its calls through the C library instead (trapped, carried by
//! the supervisor: slower, still correct).

/// Where the page is (page aligned).
pub const ADDR: u64 = 0x6f1d_5a90_0000;
/// Its size: the filter allows any instruction pointer inside it.
pub const LEN: u64 = 4096;

/// `long gadget(long nr, long a, long b, long c, long d, long e, long f)`
/// in the x86-64 SysV calling convention: the arguments moved to the system
/// call's registers, the `syscall` instruction, and the raw result (a
/// negative errno on failure) returned.
pub const CODE: [u8; 26] = [
    0x48, 0x89, 0xf8, // mov rax, rdi
    0x48, 0x89, 0xf7, // mov rdi, rsi
    0x48, 0x89, 0xd6, // mov rsi, rdx
    0x48, 0x89, 0xca, // mov rdx, rcx
    0x4d, 0x89, 0xc2, // mov r10, r8
    0x4d, 0x89, 0xc8, // mov r8, r9
    0x4c, 0x8b, 0x4c, 0x24, 0x08, // mov r9, [rsp+8]
    0x0f, 0x05, // syscall
    0xc3, // ret
];

/// Whether `ip` (seccomp_data.instruction_pointer) is in the page.
pub fn holds(ip: u64) -> bool {
    ip & !(LEN - 1) == ADDR
}
