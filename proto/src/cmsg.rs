//! Control messages (struct cmsghdr and what follows) in a program's
//! control buffer, read from a sendmsg's and written into a recvmsg's as
//! Linux reads and writes them (__cmsg_nxthdr, put_cmsg), for the preload
//! library and the supervisor alike. On bytes only: what they carry is the
//! caller's business.

use crate::Res;

/// sizeof(struct cmsghdr) (CMSG_LEN(0)): cmsg_len (a size_t), cmsg_level,
/// cmsg_type.
pub const HDR: usize = size_of::<libc::cmsghdr>();
/// The alignment of control messages (a size_t's).
pub const ALIGN: usize = size_of::<usize>();
const LEVEL_AT: usize = size_of::<usize>();

/// CMSG_ALIGN.
pub const fn align(n: usize) -> usize {
    n.next_multiple_of(ALIGN)
}

/// One control message: level, type and payload.
pub type Cmsg<'a> = (libc::c_int, libc::c_int, &'a [u8]);

/// The control messages of a sendmsg's buffer; EINVAL for a header whose
/// length is shorter than a header or runs past the buffer.
pub fn parse(control: &[u8]) -> Res<Vec<Cmsg<'_>>> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + HDR <= control.len() {
        let h = &control[off..off + HDR];
        let len = usize::from_ne_bytes(h[..LEVEL_AT].try_into().expect("a size_t"));
        let level = i32::from_ne_bytes(h[LEVEL_AT..LEVEL_AT + 4].try_into().expect("an int"));
        let ty = i32::from_ne_bytes(h[LEVEL_AT + 4..HDR].try_into().expect("an int"));
        if len < HDR || len > control.len() - off {
            return Err(libc::EINVAL);
        }
        out.push((level, ty, &control[off + HDR..off + len]));
        off += align(len);
    }
    Ok(out)
}

/// The ints of a payload (SCM_RIGHTS descriptors, SCM_CREDENTIALS words).
pub fn ints(payload: &[u8]) -> impl Iterator<Item = i32> + '_ {
    payload
        .chunks_exact(4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
}

/// Fills a recvmsg's control buffer.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    used: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Writer<'a> {
        Writer { buf, used: 0 }
    }

    /// Bytes left.
    pub fn room(&self) -> usize {
        self.buf.len() - self.used
    }

    /// Bytes written, as msg_controllen reports them.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Appends one message as put_cmsg does: cut short (its header then
    /// says so) when it does not fit, left out when not even its header
    /// does. Returns false when it was cut or left out (MSG_CTRUNC).
    pub fn put(&mut self, level: libc::c_int, ty: libc::c_int, payload: &[u8]) -> bool {
        let room = self.room();
        if room < HDR {
            return false;
        }
        let full = HDR + payload.len();
        let len = full.min(room);
        let at = self.used;
        self.buf[at..at + LEVEL_AT].copy_from_slice(&len.to_ne_bytes());
        self.buf[at + LEVEL_AT..at + LEVEL_AT + 4].copy_from_slice(&level.to_ne_bytes());
        self.buf[at + LEVEL_AT + 4..at + HDR].copy_from_slice(&ty.to_ne_bytes());
        self.buf[at + HDR..at + len].copy_from_slice(&payload[..len - HDR]);
        self.used += align(full).min(room);
        len == full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_bytes(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn written_messages_read_back() {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        assert!(w.put(
            libc::SOL_SOCKET,
            libc::SCM_CREDENTIALS,
            &int_bytes(&[1, 2, 3])
        ));
        assert_eq!(w.used(), 32, "CMSG_SPACE(12)");
        assert!(w.put(libc::SOL_SOCKET, libc::SCM_RIGHTS, &int_bytes(&[7, 8])));
        assert_eq!(w.used(), 56);
        let used = w.used();
        let got = parse(&buf[..used]).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].0, got[0].1),
            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS)
        );
        assert_eq!(ints(got[0].2).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(ints(got[1].2).collect::<Vec<_>>(), [7, 8]);
    }

    #[test]
    fn it_matches_the_c_librarys_macros() {
        // SAFETY: CMSG_LEN and CMSG_SPACE are arithmetic.
        unsafe {
            assert_eq!(HDR, libc::CMSG_LEN(0) as usize);
            assert_eq!(align(HDR + 12), libc::CMSG_SPACE(12) as usize);
            assert_eq!(align(HDR + 4), libc::CMSG_SPACE(4) as usize);
        }
    }

    #[test]
    fn a_message_past_the_room_is_cut_as_put_cmsg_cuts_it() {
        let mut buf = [0u8; 20];
        let mut w = Writer::new(&mut buf);
        assert!(!w.put(
            libc::SOL_SOCKET,
            libc::SCM_CREDENTIALS,
            &int_bytes(&[1, 2, 3])
        ));
        assert_eq!(w.used(), 20);
        assert!(!w.put(libc::SOL_SOCKET, libc::SCM_RIGHTS, &int_bytes(&[5])));
        assert_eq!(w.used(), 20, "no room for a header: nothing written");
        let got = parse(&buf).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].2, &1i32.to_ne_bytes(), "the header says 20 bytes");
        let mut none: [u8; 0] = [];
        assert!(!Writer::new(&mut none).put(1, 1, &[]));
    }

    #[test]
    fn bad_headers_are_einval() {
        let mut buf = [0u8; 32];
        let mut w = Writer::new(&mut buf);
        w.put(libc::SOL_SOCKET, libc::SCM_RIGHTS, &int_bytes(&[3]));
        // A length past the buffer.
        let mut long = buf;
        long[..8].copy_from_slice(&40usize.to_ne_bytes());
        assert_eq!(parse(&long), Err(libc::EINVAL));
        // A length shorter than a header.
        let mut short = buf;
        short[..8].copy_from_slice(&8usize.to_ne_bytes());
        assert_eq!(parse(&short), Err(libc::EINVAL));
        // Bytes too few for a header are no message at all.
        assert_eq!(parse(&buf[..10]), Ok(vec![]));
        assert_eq!(parse(&[]), Ok(vec![]));
    }
}
