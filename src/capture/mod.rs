//! Capture: every message of the mount a reader may see, as a live pcapng
//! stream that Wireshark and tshark read without a plugin. A capture is a
//! tap on the engine (src/engine/tap.rs) with a bounded buffer of its own;
//! the FUSE layer serves it as `.udsfs/capture` and `.udsfs/sock/N/capture`.
//!
//! - `filter`: the lines a reader writes before reading;
//! - `convs`: which conversation (pcapng interface) each socket is in;
//! - `record`: what is buffered between the tap and the reader;
//! - `reader`: the tap and its buffer, with drop accounting;
//! - `budget`: what one user's buffers may hold between them;
//! - `encode`: records into pcapng blocks, in one of two encodings:
//!   `upper_pdu` (exact boundaries, a named dissector) or `tcp_synth`
//!   (a synthetic TCP connection per socket pair);
//! - `pcapng`: the block format.

mod budget;
mod convs;
mod encode;
pub mod filter;
pub mod pcapng;
mod reader;
mod record;
pub mod tcp_synth;
mod upper_pdu;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use nix::errno::Errno;

pub use filter::{Filter, Format};
pub use reader::{Access, Reader};

use crate::engine::Engine;
use crate::engine::tap::Tap;

/// Who may open a capture of the mount (`-o capture=...`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Everyone, each seeing the messages of sockets they could open.
    #[default]
    Users,
    /// Root only.
    Root,
}

impl Policy {
    pub fn from_name(s: &str) -> Option<Policy> {
        match s {
            "users" | "all" => Some(Policy::Users),
            "root" => Some(Policy::Root),
            _ => None,
        }
    }
}

/// An open capture: attached to the engine while it lives.
pub struct Handle {
    pub reader: Arc<Reader>,
    tap: Arc<dyn Tap>,
    eng: Arc<Engine>,
}

impl Handle {
    /// A capture for a reader with `access`; `only`: one socket's
    /// conversations (`.udsfs/sock/N/capture`).
    /// ENOBUFS: the user's captures hold all they may (`budget`).
    pub fn open(eng: &Arc<Engine>, access: Access, only: Option<u64>) -> Result<Handle, Errno> {
        let reader = Reader::new(access, only, Filter::default())?;
        let tap: Arc<dyn Tap> = reader.clone();
        eng.taps.attach(tap.clone());
        // After the attach: a lane made from now on sees the tap. The lanes
        // of connections this reader may see go down; the others stay.
        eng.lanes_observed_down();
        Ok(Handle {
            reader,
            tap,
            eng: eng.clone(),
        })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.eng.taps.detach(&self.tap);
    }
}
