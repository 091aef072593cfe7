//! Which front an executable needs, from its first bytes: the preload library
//! reaches only a program run by the dynamic loader (PT_INTERP) that makes
//! its socket calls through the C library; a static binary or a Go binary
//! (raw system calls even when linked dynamically for cgo) needs the seccomp
//! supervisor. `udsfs run` decides CMD's front with it (src/run.rs) and the
//! preload library an exec's (preload/src/exec.rs). Nothing here allocates:
//! the library calls it between fork and exec.

/// What the kernel would do with a file whose first bytes are `head`.
#[derive(Debug, PartialEq, Eq)]
pub enum Head<'a> {
    /// A `#!` script: its interpreter, and with `env` as the interpreter the
    /// program env runs (its first word not starting with `-`).
    Script {
        interp: &'a [u8],
        env_prog: Option<&'a [u8]>,
    },
    /// An ELF executable: whether it has a PT_INTERP, and where its first
    /// PT_NOTE segment is (file offset, size), which `is_go_note` reads.
    Elf {
        interp: bool,
        note: Option<(u64, u64)>,
    },
}

/// How many bytes of a file `parse` wants: the `#!` line, the ELF header
/// and the program headers (which linkers put right after it).
pub const HEAD_LEN: usize = 4096;

/// The file's kind; None: neither a script nor an ELF (or cut short).
pub fn parse(head: &[u8]) -> Option<Head<'_>> {
    if let Some(rest) = head.strip_prefix(b"#!") {
        let line = rest.split(|&b| b == b'\n').next()?;
        let mut words = line
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|w| !w.is_empty());
        let interp = words.next()?;
        let env_prog = if interp.rsplit(|&b| b == b'/').next() == Some(b"env") {
            words.find(|w| !w.starts_with(b"-"))
        } else {
            None
        };
        return Some(Head::Script { interp, env_prog });
    }
    elf(head)
}

fn elf(head: &[u8]) -> Option<Head<'_>> {
    if head.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = match head.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let big = *head.get(5)? == 2;
    let num = |at: usize, len: usize| -> Option<u64> {
        let b = head.get(at..at.checked_add(len)?)?;
        Some(if big {
            b.iter().fold(0u64, |v, &x| (v << 8) | x as u64)
        } else {
            b.iter().rev().fold(0u64, |v, &x| (v << 8) | x as u64)
        })
    };
    let (phoff, phentsize, phnum) = if wide {
        (num(0x20, 8)?, num(0x36, 2)?, num(0x38, 2)?)
    } else {
        (num(0x1c, 4)?, num(0x2a, 2)?, num(0x2c, 2)?)
    };
    const PT_INTERP: u64 = 3;
    const PT_NOTE: u64 = 4;
    let (mut interp, mut note) = (false, None);
    for i in 0..phnum {
        let at = usize::try_from(phoff.checked_add(i.checked_mul(phentsize)?)?).ok()?;
        match num(at, 4)? {
            PT_INTERP => interp = true,
            PT_NOTE if note.is_none() => {
                note = Some(if wide {
                    (num(at + 8, 8)?, num(at + 32, 8)?)
                } else {
                    (num(at + 4, 4)?, num(at + 16, 4)?)
                });
            }
            _ => {}
        }
    }
    Some(Head::Elf { interp, note })
}

/// Does a PT_NOTE segment (its bytes, little-endian) hold the Go build ID
/// note (name "Go", type 4), which every Go toolchain binary carries?
pub fn is_go_note(seg: &[u8]) -> bool {
    let word = |at: usize| -> Option<usize> {
        let b = seg.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let align = |n: usize| n.div_ceil(4) * 4;
    let mut at = 0;
    while let (Some(namesz), Some(descsz), Some(ty)) = (word(at), word(at + 4), word(at + 8)) {
        let name = seg.get(at + 12..at + 12 + namesz.min(seg.len()));
        if ty == 4 && name == Some(b"Go\0\0".as_slice()) {
            return true;
        }
        let Some(next) = (at + 12)
            .checked_add(align(namesz))
            .and_then(|n| n.checked_add(align(descsz)))
        else {
            return false;
        };
        at = next;
    }
    false
}

/// Whether an ELF executable needs the supervisor: no program interpreter
/// (static), or Go (`go_note`: its PT_NOTE segment read, if it has one).
pub fn needs_supervisor(interp: bool, go_note: Option<&[u8]>) -> bool {
    !interp || go_note.is_some_and(is_go_note)
}

/// Whether the exec of a file with `mode`, owner `uid` and group `gid`
/// (with file capabilities: `caps`), on a mount without nosuid, changes
/// the credentials of a process whose effective ids are `euid` and `egid`:
/// set-user-ID to another user, set-group-ID (with group execute, as Linux
/// wants) to another group, or capabilities. Such a program runs without
/// its privilege under no_new_privs.
pub fn raises_privilege(mode: u32, uid: u32, gid: u32, euid: u32, egid: u32, caps: bool) -> bool {
    let suid = mode & 0o4000 != 0 && uid != euid;
    let sgid = mode & 0o2010 == 0o2010 && gid != egid;
    suid || sgid || caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileged_files() {
        // (mode, uid, gid) of the file; the caller is uid 1000, gid 1000.
        let p = |mode, uid, gid, caps| raises_privilege(mode, uid, gid, 1000, 1000, caps);
        assert!(p(0o4755, 0, 0, false));
        assert!(!p(0o4755, 1000, 0, false), "set-user-ID to oneself");
        assert!(p(0o2755, 0, 65534, false));
        assert!(
            !p(0o2745, 0, 65534, false),
            "set-group-ID without group execute"
        );
        assert!(
            !p(0o2755, 0, 1000, false),
            "set-group-ID to one's own group"
        );
        assert!(p(0o755, 0, 0, true));
        assert!(!p(0o755, 0, 0, false));
    }

    #[test]
    fn scripts() {
        assert_eq!(
            parse(b"#!/bin/sh -e\nexit 0\n"),
            Some(Head::Script {
                interp: b"/bin/sh",
                env_prog: None
            })
        );
        assert_eq!(
            parse(b"#! /usr/bin/env -S python3 -u\n"),
            Some(Head::Script {
                interp: b"/usr/bin/env",
                env_prog: Some(b"python3")
            })
        );
        assert_eq!(parse(b"#!\n"), None);
        assert_eq!(parse(b"plain text"), None);
    }

    #[test]
    fn go_notes() {
        let mut seg = Vec::new();
        // A GNU build-id note first, then Go's.
        for (name, ty, desc) in [
            (&b"GNU\0"[..], 3u32, &[1u8; 20][..]),
            (b"Go\0\0", 4, b"abcdefgh"),
        ] {
            seg.extend_from_slice(&(name.len() as u32).to_le_bytes());
            seg.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            seg.extend_from_slice(&ty.to_le_bytes());
            seg.extend_from_slice(name);
            seg.extend_from_slice(desc);
        }
        assert!(is_go_note(&seg));
        assert!(!is_go_note(&seg[..36]));
        assert!(!is_go_note(&[0xff; 40]));
        assert!(needs_supervisor(false, None));
        assert!(needs_supervisor(true, Some(&seg)));
        assert!(!needs_supervisor(true, Some(&seg[..36])));
        assert!(!needs_supervisor(true, None));
    }
}
