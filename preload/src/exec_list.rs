//! execl, execlp and execle, the list forms of exec. The C library's own
//! call its execve from inside, past this library, so a static program
//! exec'd through them would escape the run (exec.rs); here each gathers
//! its list into an argv and goes through this library's execv, execvp or
//! execve. Stable Rust takes no C varargs: a naked entry stores the five
//! argument registers that may hold list items side by side and passes
//! them and where the items on the stack begin (the x86-64 System V ABI
//! passes a variadic call's pointers as a plain call's: rsi, rdx, rcx, r8,
//! r9, then the stack in order).

use libc::{c_char, c_int};

/// What the entry hands over: the path (or file), the five register
/// items, the first stack item.
type Gather = unsafe extern "C" fn(*const c_char, *const usize, *const usize) -> c_int;

/// Items beyond this many are gathered on the heap.
const ON_STACK: usize = 256;

/// The list's items up to its NULL as an argv, and with `envp_after` the
/// word that follows the NULL (execle's envp), read from `regs` and then
/// from `stack`.
///
/// # Safety
/// `regs` and `stack` as the naked entries pass them, for a NULL-ended list
/// (with `envp_after`, followed by one more item).
unsafe fn with_list(
    regs: *const usize,
    stack: *const usize,
    envp_after: bool,
    done: impl FnOnce(*const *const c_char, *const *const c_char) -> c_int,
) -> c_int {
    // SAFETY: item k is register k for k < 5, else stack word k - 5; the
    // caller ended the list with NULL, and execle put envp after it.
    let item = |k: usize| unsafe {
        if k < 5 {
            *regs.add(k)
        } else {
            *stack.add(k - 5)
        }
    };
    let mut n = 0;
    while item(n) != 0 {
        n += 1;
    }
    let after = if envp_after {
        item(n + 1) as *const *const c_char
    } else {
        std::ptr::null()
    };
    let mut small = [std::ptr::null::<c_char>(); ON_STACK + 1];
    let mut large = Vec::new();
    let argv: &mut [*const c_char] = if n < ON_STACK {
        &mut small[..=n]
    } else {
        large.resize(n + 1, std::ptr::null());
        &mut large
    };
    for (k, a) in argv.iter_mut().take(n).enumerate() {
        *a = item(k) as *const c_char;
    }
    done(argv.as_ptr(), after)
}

/// The entry `$name`: a frame, the registers rsi..r9 stored at its bottom
/// (the first item at the lowest address), then `$gather(path, regs,
/// stack)`, whose result it returns; the stack items start above the return
/// address. `$gather` hands the list as an argv to this library's `$exec`
/// (with `envp`: and the word after the list's NULL as its envp).
macro_rules! list_entry {
    ($name:ident, $gather:ident, $exec:ident) => {
        list_entry!(@entry $name, $gather, false, |path, argv, _| crate::exec::$exec(path, argv));
    };
    ($name:ident, $gather:ident, $exec:ident, envp) => {
        list_entry!(@entry $name, $gather, true, |path, argv, envp| crate::exec::$exec(path, argv, envp));
    };
    (@entry $name:ident, $gather:ident, $envp_after:expr, |$path:ident, $argv:ident, $envp:pat_param| $call:expr) => {
        unsafe extern "C" fn $gather(
            $path: *const c_char,
            regs: *const usize,
            stack: *const usize,
        ) -> c_int {
            // SAFETY: as the entry passes them; the exec call as the caller
            // asked.
            unsafe { with_list(regs, stack, $envp_after, |$argv, $envp| $call) }
        }

        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!(
                "push rbp",
                "mov rbp, rsp",
                "sub rsp, 48",
                "mov [rsp], rsi",
                "mov [rsp + 8], rdx",
                "mov [rsp + 16], rcx",
                "mov [rsp + 24], r8",
                "mov [rsp + 32], r9",
                "mov rsi, rsp",
                "lea rdx, [rbp + 16]",
                "call {gather}",
                "leave",
                "ret",
                gather = sym $gather,
            )
        }
    };
}

list_entry!(execl, gather_execl, execv);
list_entry!(execlp, gather_execlp, execvp);
list_entry!(execle, gather_execle, execve, envp);

/// The gatherers keep the entry's signature.
const _: [Gather; 3] = [gather_execl, gather_execlp, gather_execle];
