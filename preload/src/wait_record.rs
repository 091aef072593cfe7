//! The laned calls in progress on this thread, for a program whose signal
//! handler leaves one by siglongjmp (a timeout made of alarm() and a jump:
//! read() is async-signal-safe, so POSIX lets a handler jump out of it).
//! Linux's read is one system call, and a jump leaves nothing behind. A
//! laned read or write runs in the library holding its lane's region
//! (lane_hold.rs), its turn at the end (lane_turn.rs), and while it sleeps
//! the note that keeps its file (lane.rs `Kept`), the futex word noted for
//! the trampoline (wait_note.rs) and a raised count of sleepers; a jump
//! skips their drops, and the program's close of the socket then left it
//! open (its peer never saw EOF), with a region and four eventfds, and the
//! end's turn taken for good. Each call is recorded here with what undoes
//! it, and the thread's next laned call, poll or close undoes the calls it
//! is not nested in (`reap`). A poll or epoll_wait likewise (its holds, its
//! ends' waiting flags and counts: lane_ready.rs `undo_wait`).
//!
//! Nested or left? While a call lives, its thread runs only the call's own
//! code and signal handlers: below the call on the same stack, or on the
//! signal stack. The trampoline (restart.rs) notes its own stack pointer
//! into each call on its stack (the highest: the outermost handler's), the
//! thread's signal stack from the ucontext the kernel gives it, and counts
//! the handlers begun and not returned. Code on the same stack above the
//! call's frame, or above that handler's while a handler begun since has
//! not returned (the library's own calls from inside the call are below the
//! call's frame too), is past a jump, unless the thread runs on its signal
//! stack (asked of the kernel then: one system call a jump). Not undone: a
//! jump in the few instructions before a call's record is made or after it
//! ends (`enter`'s look-up of the end), nor the undo of a thread that makes
//! no laned call or close after its jump (another thread's close of the
//! socket keeps it open), nor one from a call deeper on the stack than the
//! jumped-out-of call's first frames without the trampoline's handler mark
//! (adversarial_lanes7 `handoff`, `deep`). Async-signal-safe: const
//! thread-locals of Cells.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// What undoes a laned read or write (lane.rs `undo_call`).
#[derive(Clone, Copy)]
pub struct Call {
    /// The key of the call's hold of its region (lane_hold.rs).
    pub hold: u64,
    /// The turn the call takes (lane_turn.rs; 0: none), let go if the
    /// thread holds it.
    pub turn: usize,
    /// The call's note of its file (lane.rs `Kept`): its place and inode.
    pub kept: Option<(usize, u64)>,
    /// The futex word noted before the call's sleep (wait_note.rs).
    pub word: usize,
}

/// A laned end a poll or epoll_wait raised its waiting flags on (and
/// counted itself on its eventfd) for its sleep: lane_ready.rs.
#[derive(Clone, Copy)]
pub struct WaitEnd {
    /// The key of the wait's hold of the end let go with it (0: the
    /// wait's `holds` has it).
    pub hold: u64,
    /// The end's region: kept mapped by the wait's hold, which a jump
    /// leaks.
    pub region: usize,
    pub ev: i32,
    /// The poll events whose flags it raised (those of a poll: 16 bits).
    pub events: u16,
    pub side: u8,
}

/// The ends of a wait recorded; one past them is not undone. Few: the
/// records are thread-locals, which the C library places in each thread's
/// stack (hackbench -T's 16 KiB ones: `footprint` below).
pub const WAIT_ENDS: usize = 2;

/// What undoes a poll's or epoll_wait's sleep (lane_ready.rs `undo_wait`).
#[derive(Clone, Copy)]
pub struct Wait {
    pub ends: [WaitEnd; WAIT_ENDS],
    /// Ends raised (at most WAIT_ENDS of them recorded).
    pub n: usize,
    /// Counted among the process's epoll sleepers.
    pub counted: bool,
    /// The keys of the wait's holds of its ends (poll's; 0: none).
    pub holds: [u64; WAIT_ENDS],
}

/// Who undoes a recorded call (given what it recorded, and the count of
/// sleepers its sleep raised).
pub type UndoWith = fn(Undo, usize);

/// What undoes one recorded call.
#[derive(Clone, Copy)]
pub enum Undo {
    Call(Call),
    Wait(Wait),
}

impl Wait {
    pub const NONE: Wait = Wait {
        ends: [WaitEnd {
            hold: 0,
            ev: -1,
            region: 0,
            side: 0,
            events: 0,
        }; WAIT_ENDS],
        n: 0,
        counted: false,
        holds: [0; WAIT_ENDS],
    };
}

struct Record {
    /// A stack pointer of the sleeping call (0: not a sleep, or one being
    /// made or ended).
    sp: Cell<usize>,
    /// Whether the sleep was made on the thread's signal stack.
    alt: Cell<bool>,
    /// The highest stack pointer of a handler run since on the sleep's
    /// stack, below it (0: none).
    hsp: Cell<usize>,
    /// The thread's handlers in progress (`Records::inside`) when it began.
    inside: Cell<u32>,
    undo: Cell<Undo>,
    /// Who undoes it (`begin`'s `undo_with`).
    undo_with: Cell<Option<UndoWith>>,
    /// The count of sleepers the sleep raised, while raised (ring.rs
    /// `wait_marked`; 0: none).
    raised: Cell<usize>,
}

impl Record {
    const fn new() -> Record {
        Record {
            sp: Cell::new(0),
            alt: Cell::new(false),
            hsp: Cell::new(0),
            inside: Cell::new(0),
            undo: Cell::new(Undo::Wait(Wait::NONE)),
            undo_with: Cell::new(None),
            raised: Cell::new(0),
        }
    }
}

/// Calls nested in handlers that make laned calls, recorded (deeper ones
/// are not).
const DEPTH: usize = 4;

struct Records {
    n: Cell<usize>,
    at: [Record; DEPTH],
    /// The thread's signal stack, as the trampoline last saw it
    /// (start, end; 0, 0: none).
    alt: Cell<(usize, usize)>,
    /// The program's handlers begun and not returned on the thread (one
    /// jumped out of never returns: counted, the count is compared only).
    inside: Cell<u32>,
    /// Whether the thread's exit undoes its calls left (`init`).
    exit_noted: Cell<bool>,
}

thread_local! {
    static RECORDS: Records = const {
        Records {
            n: Cell::new(0),
            at: [const { Record::new() }; DEPTH],
            alt: Cell::new((0, 0)),
            inside: Cell::new(0),
            exit_noted: Cell::new(false),
        }
    };
}

/// An address in the caller's frame: its stack pointer, near enough.
#[inline(never)]
fn stack_pointer() -> usize {
    let here = 0u8;
    std::hint::black_box(&here) as *const u8 as usize
}

fn within((start, end): (usize, usize), sp: usize) -> bool {
    start <= sp && sp < end
}

/// Whether the thread runs on its signal stack (asked of the kernel).
fn on_signal_stack() -> bool {
    // SAFETY: a query; `old` is written by the kernel.
    unsafe {
        let mut old: libc::stack_t = std::mem::zeroed();
        libc::sigaltstack(std::ptr::null(), &mut old) == 0 && old.ss_flags & libc::SS_ONSTACK != 0
    }
}

/// A laned call's record, for the call to add to, ended when dropped (when
/// the call returns or unwinds: its own drops ran). Made by `begin`; a
/// thread's own (not Send: its thread-locals).
pub struct Rec {
    /// The record (None: not recorded, DEPTH calls were already).
    r: Option<&'static Record>,
    s: &'static Records,
    /// The thread's records below it.
    n: usize,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Rec {
    /// Where the call's sleep marks the count of sleepers it raised.
    pub fn raised(&self) -> Option<&Cell<usize>> {
        self.r.map(|r| &r.raised)
    }

    fn change(&self, f: impl FnOnce(&mut Undo)) {
        if let Some(r) = self.r {
            let mut u = r.undo.get();
            f(&mut u);
            r.undo.set(u);
        }
    }

    /// The call's note of its file (lane.rs `Kept`) made: its place.
    pub fn kept(&self, kept: Option<(usize, u64)>) {
        self.change(|u| {
            if let Undo::Call(c) = u {
                c.kept = kept;
            }
        });
    }

    /// A wait raised the flags of `end` (after the raise).
    pub fn raised_end(&self, end: WaitEnd) {
        self.change(|u| {
            if let Undo::Wait(w) = u {
                if let Some(e) = w.ends.get_mut(w.n) {
                    *e = end;
                }
                w.n += 1;
            }
        });
    }

    /// A wait lowers its ends' flags (before the first lowering: a jump
    /// in the middle leaves the rest raised, never lowers one twice).
    pub fn lowering(&self) {
        self.change(|u| {
            if let Undo::Wait(w) = u {
                w.n = 0;
            }
        });
    }

    /// A wait holds an end (`key`: lane_hold.rs), or lets go of it
    /// (`held` false: before it does).
    pub fn held(&self, key: u64, held: bool) {
        self.change(|u| {
            if let Undo::Wait(w) = u {
                let (from, to) = if held { (0, key) } else { (key, 0) };
                if let Some(k) = w.holds.iter_mut().find(|k| **k == from) {
                    *k = to;
                }
            }
        });
    }

    /// A wait counted itself among the epoll sleepers (after), or is to
    /// uncount itself (before).
    pub fn counted(&self, counted: bool) {
        self.change(|u| {
            if let Undo::Wait(w) = u {
                w.counted = counted;
            }
        });
    }
}

/// A laned call begins, recorded with `undo` (what it holds from its start;
/// the call adds to it through the record) and undone by `undo_with` if a
/// handler jumps out of it. No closure: the call's frames stay as deep as
/// without (hackbench -T's threads run on 16 KiB stacks).
pub fn begin(undo: Undo, undo_with: UndoWith) -> Rec {
    // SAFETY: the thread's own thread-local, which outlives every Rec made
    // on the thread (Rec is not Send and lives on the thread's stack).
    let s: &'static Records = RECORDS.with(|s| unsafe { &*(s as *const Records) });
    let n = s.n.get();
    let Some(r) = s.at.get(n) else {
        return Rec {
            r: None,
            s,
            n,
            _thread: std::marker::PhantomData,
        };
    };
    s.n.set(n + 1);
    r.undo.set(undo);
    r.undo_with.set(Some(undo_with));
    r.hsp.set(0);
    r.inside.set(s.inside.get());
    r.raised.set(0);
    let sp = stack_pointer();
    r.alt.set(within(s.alt.get(), sp));
    // Last: a record without its stack pointer is never undone.
    r.sp.set(sp);
    Rec {
        r: Some(r),
        s,
        n,
        _thread: std::marker::PhantomData,
    }
}

impl Drop for Rec {
    fn drop(&mut self) {
        let Some(r) = self.r else {
            return;
        };
        // Calls left above it (jumped out of by a handler nested in it
        // that returned since) are over too.
        for above in (self.n + 1..self.s.n.get().min(DEPTH)).rev() {
            undo_one(&self.s.at[above]);
        }
        r.sp.set(0);
        self.s.n.set(self.n);
    }
}

/// The key whose destructor undoes a thread's calls left at its exit
/// (`init`; u32::MAX: none).
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Made at the library's start (not in a handler): a thread that jumped out
/// of a laned call and then ends makes no call to undo it from, while
/// another thread may close the socket (adversarial_lanes7 `handoff`).
pub fn init() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a new key with our destructor.
    if unsafe { libc::pthread_key_create(&mut key, Some(at_thread_exit)) } == 0 {
        EXIT_KEY.store(key, Ordering::Relaxed);
    }
}

/// A thread with recorded calls ends: they were jumped out of (or left by
/// pthread_exit in a handler): undone, the latest first.
extern "C" fn at_thread_exit(_: *mut libc::c_void) {
    RECORDS.with(|s| {
        while let Some(top) = s.n.get().checked_sub(1) {
            if let Some(r) = s.at.get(top) {
                undo_one(r);
            }
            s.n.set(top);
        }
    })
}

/// The program's signal handler runs on this thread (the trampoline,
/// before it; `ctx` the kernel's ucontext): its stack pointer noted into
/// the sleeps it is nested in.
pub fn handler_runs(ctx: *const libc::c_void) {
    let tsp = stack_pointer();
    RECORDS.with(|s| {
        s.inside.set(s.inside.get().wrapping_add(1));
        if !ctx.is_null() {
            // SAFETY: the ucontext the kernel gave an SA_SIGINFO handler;
            // its uc_stack is the thread's signal stack.
            let st = unsafe { (*(ctx as *const libc::ucontext_t)).uc_stack };
            s.alt.set(if st.ss_flags & libc::SS_DISABLE != 0 {
                (0, 0)
            } else {
                let start = st.ss_sp as usize;
                (start, start.saturating_add(st.ss_size))
            });
        }
        let n = s.n.get();
        if n == 0 {
            return;
        }
        // A handler inside a laned call may jump out of it: the thread's
        // end undoes what is left (once a thread; glibc's first keys live
        // in the thread's own block: no allocation).
        if !s.exit_noted.replace(true) {
            let key = EXIT_KEY.load(Ordering::Relaxed);
            if key != u32::MAX {
                // SAFETY: a key made by `init`; a non-null value makes
                // glibc run its destructor at the thread's exit.
                unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
            }
        }
        let alt = within(s.alt.get(), tsp);
        for r in &s.at[..n.min(DEPTH)] {
            let sp = r.sp.get();
            if sp != 0 && r.alt.get() == alt && tsp < sp && tsp > r.hsp.get() {
                r.hsp.set(tsp);
            }
        }
    })
}

/// The program's handler returned (`handler_runs`).
pub fn handler_returned() {
    RECORDS.with(|s| s.inside.set(s.inside.get().wrapping_sub(1)));
}

/// Undoes record `r` (it is left) by its `undo_with`.
fn undo_one(r: &Record) {
    if r.sp.replace(0) != 0 {
        if let Some(f) = r.undo_with.get() {
            f(r.undo.get(), r.raised.replace(0));
        }
    }
}

/// The library is called on this thread: the recorded calls it is not
/// nested in (a handler jumped out of them) undone, the latest first. A
/// thread-local look when there are none.
pub fn reap() {
    RECORDS.with(|s| {
        if s.n.get() == 0 {
            return;
        }
        let here = stack_pointer();
        let mut on_alt = None;
        while let Some(top) = s.n.get().checked_sub(1) {
            let Some(r) = s.at.get(top) else {
                return;
            };
            let sp = r.sp.get();
            // Being made or ended under this handler: nested in it.
            if sp == 0 {
                return;
            }
            // Below the call's frame: the library's own calls from inside
            // it, unless a handler begun since has not returned and this is
            // above that handler's frame (a jump out of it).
            let handler = r.hsp.get();
            let jumped = handler != 0 && here >= handler && s.inside.get() != r.inside.get();
            if here < sp && !jumped {
                return;
            }
            if *on_alt.get_or_insert_with(on_signal_stack) && !r.alt.get() {
                return;
            }
            undo_one(r);
            s.n.set(top);
        }
    })
}

#[cfg(test)]
mod tests {
    /// The records are thread-locals, in the static TLS block the C library
    /// carves out of every thread's stack: a thread of a 16 KiB stack
    /// (hackbench -T, its 4 KiB buffer on it, the debug build's frames)
    /// overflowed once they took 1.8 KiB.
    #[test]
    fn footprint() {
        let size = std::mem::size_of::<super::Records>();
        assert!(size <= 640, "wait_record's thread-locals take {size} bytes");
    }
}
