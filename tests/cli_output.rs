//! The CLI's generated output (man pages, completions) to a reader that
//! went away: the command ends quietly instead of panicking (`.ci/run` pipes
//! `udsfs completions bash` into `grep -q`, which exits at its first match).

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

fn run_into_closed_pipe(args: &[&str]) -> std::process::Output {
    let (read_end, write_end): (OwnedFd, OwnedFd) = nix::unistd::pipe().expect("pipe");
    drop(read_end);
    Command::new(env!("CARGO_BIN_EXE_udsfs"))
        .args(args)
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .expect("run udsfs")
}

#[test]
fn completions_and_man_pages_end_quietly_when_their_reader_is_gone() {
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"],
        &["man"],
        &["man", "mount"],
    ] {
        let out = run_into_closed_pipe(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("panicked"),
            "udsfs {args:?} into a closed pipe: {:?}, stderr: {stderr}",
            out.status
        );
    }
}
