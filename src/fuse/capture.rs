//! `.udsfs/capture` and `.udsfs/sock/N/capture`: each open is a capture of
//! its own (src/capture), read as a pcapng stream; writes before the first
//! read are filter lines.

use std::sync::atomic::Ordering;

use nix::errno::Errno;

use super::Inner;
use super::files::{FileKind, OpenFile};
use crate::capture::{Access, Handle};
use crate::engine::Caller;

impl Inner {
    /// Opens a capture for `c`: of the mount, or of the socket directory
    /// with `generation`. Non-root callers see the messages of sockets they
    /// own; `-o capture=root` keeps them out.
    pub(super) fn open_capture(&self, generation: Option<u64>, c: &Caller) -> Result<u64, Errno> {
        if !c.is_root() && self.capture_root_only.load(Ordering::Relaxed) {
            log::info!("uid {}: capture is for root on this mount", c.fsuid);
            return Err(Errno::EACCES);
        }
        let only = match generation {
            None => None,
            Some(g) => {
                let (_, d) = self.eng.dir_by_generation(g).ok_or(Errno::ENOENT)?;
                if !self.visible(&d, c) || (!c.is_root() && d.uid != c.fsuid) {
                    return Err(Errno::ENOENT);
                }
                // A received entry's number is its own; the socket's is what
                // the capture sees.
                Some(d.sock.id)
            }
        };
        let access = Access {
            uid: c.fsuid,
            all: c.is_root(),
        };
        let h = Handle::open(&self.eng, access, only)?;
        Ok(self.files.insert(OpenFile::new(None, FileKind::Capture(h))))
    }

    /// Whether only root may open captures (`-o capture=root`).
    pub fn set_capture_root_only(&self, on: bool) {
        self.capture_root_only.store(on, Ordering::Relaxed);
    }
}
