//! Why a mount failed, in words that say what to do: FUSE needs `/dev/fuse`
//! (root opens it directly; other users go through setuid `fusermount3`).

use std::io::ErrorKind;
use std::path::Path;

pub fn explain(mp: &Path, e: std::io::Error) -> String {
    let what = format!("cannot mount {}: {e}", mp.display());
    let root = nix::unistd::geteuid().is_root();
    let hint = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Err(d) if d.kind() == ErrorKind::NotFound => Some(
            "/dev/fuse does not exist: load the FUSE module (modprobe fuse); \
             in a container, pass the device in (--device /dev/fuse)"
                .to_string(),
        ),
        Err(d) => Some(format!(
            "cannot open /dev/fuse ({d}): it should be crw-rw-rw- (as root: chmod 0666 /dev/fuse)\
             {}",
            if root {
                ""
            } else {
                "; ordinary users mount through fusermount3 (package fuse3), setuid root"
            }
        )),
        Ok(_) if !root && which("fusermount3").is_none() => Some(
            "fusermount3 is not installed (package fuse3): users other than root mount through it"
                .into(),
        ),
        Ok(_) if e.to_string().contains("user_allow_other") => Some(
            "allow_other for users other than root needs user_allow_other in /etc/fuse.conf".into(),
        ),
        Ok(_) => None,
    };
    match hint {
        Some(h) => format!("{what}\n  {h}"),
        None => what,
    }
}

fn which(prog: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}
