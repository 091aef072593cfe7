//! A message's parts besides its payload, as the send and receive paths
//! hand them on (to the ioctl, the `msg` file, the control buffer).

use udsfs_proto::ioctl::TIMEO_NONE;

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
}

/// One received message, however it came; its payload went straight into
/// the caller's buffers.
pub struct Got {
    /// Payload bytes placed.
    pub len: usize,
    pub full_len: usize,
    /// The sender (wire form).
    pub from: Vec<u8>,
    /// `from` is a sun_path as its program gave it.
    pub from_as_given: bool,
    pub creds: Option<[u32; 3]>,
    /// The sender's pid, for SCM_PIDFD.
    pub pidfd: Option<i32>,
    /// A pidfd of the sender the daemon made when it sent, to claim.
    pub pidfd_tag: Option<u64>,
    pub rights: Vec<u64>,
    /// The byte is the OOB byte (MSG_OOB in msg_flags).
    pub oob: bool,
    /// The daemon dropped passed sockets (MSG_CTRUNC).
    pub ctrunc: bool,
    /// What the daemon left of SO_RCVTIMEO (see MsgHead::timeo_left).
    pub timeo_left: u64,
}

impl Default for Got {
    fn default() -> Got {
        Got {
            len: 0,
            full_len: 0,
            from: Vec::new(),
            from_as_given: false,
            creds: None,
            pidfd: None,
            pidfd_tag: None,
            rights: Vec::new(),
            oob: false,
            ctrunc: false,
            timeo_left: TIMEO_NONE,
        }
    }
}
