//! A message's parts besides its payload, as the send and receive paths
//! hand them on (to the ioctl, the `msg` file, the control buffer).

use udsfs_calls::client::Extras;
pub use udsfs_calls::client::Got;

/// What a send carries besides its payload.
#[derive(Default)]
pub struct Meta {
    /// The destination (wire form).
    pub to: Option<Vec<u8>>,
    /// SCM_CREDENTIALS: pid, uid, gid.
    pub creds: Option<[u32; 3]>,
    /// Sockets by number and files by tag (`udsfs_proto::passed`).
    pub rights: Vec<u64>,
    /// Open while the files among `rights` wait in the daemon for this send.
    pub channel: Option<crate::fdpass::Channel>,
}

impl Meta {
    pub fn is_empty(&self) -> bool {
        self.to.is_none() && self.creds.is_none() && self.rights.is_empty()
    }

    pub fn extras(&self) -> Extras<'_> {
        Extras {
            to: self.to.as_deref(),
            creds: self.creds,
            rights: &self.rights,
        }
    }
}
