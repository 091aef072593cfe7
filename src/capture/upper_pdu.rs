//! The exported-PDU header of LINKTYPE_WIRESHARK_UPPER_PDU packets: tags
//! (2-byte big-endian type, 2-byte big-endian length, value) naming the
//! dissector for the payload that follows, the Protocol and Info columns and
//! the direction. Tag numbers: Wireshark's wsutil/exported_pdu_tlvs.h.

const TAG_END: u16 = 0;
const TAG_DISSECTOR_NAME: u16 = 12;
const TAG_COL_PROT_TEXT: u16 = 33;
const TAG_P2P_DIRECTION: u16 = 35;
const TAG_COL_INFO_TEXT: u16 = 36;

/// Wireshark's P2P_DIR_SENT and P2P_DIR_RECV.
pub const SENT: u32 = 0;
pub const RECEIVED: u32 = 1;

/// Column texts are kept short: Wireshark cuts them anyway.
const MAX_TEXT: usize = 200;

fn tag(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    // Strings are padded with NULs to 4 bytes, counted in the length as
    // Wireshark writes them (readers drop trailing NULs).
    let padded = value.len().next_multiple_of(4);
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&(padded as u16).to_be_bytes());
    out.extend_from_slice(value);
    out.resize(out.len() + padded - value.len(), 0);
}

fn text(out: &mut Vec<u8>, ty: u16, s: &str) {
    tag(out, ty, &s.as_bytes()[..s.floor_char_boundary(MAX_TEXT)]);
}

/// The header for one PDU: `dissector` decodes the payload ("data" shows
/// the bytes), `info` fills the Info column when the dissector leaves it.
pub fn header(dissector: &str, direction: Option<u32>, info: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + info.len());
    text(&mut out, TAG_DISSECTOR_NAME, dissector);
    text(&mut out, TAG_COL_PROT_TEXT, "udsfs");
    if let Some(d) = direction {
        tag(&mut out, TAG_P2P_DIRECTION, &d.to_be_bytes());
    }
    if !info.is_empty() {
        text(&mut out, TAG_COL_INFO_TEXT, info);
    }
    tag(&mut out, TAG_END, &[]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (type, value without padding NULs) of each tag.
    fn tags(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        loop {
            let ty = u16::from_be_bytes([b[0], b[1]]);
            let len = u16::from_be_bytes([b[2], b[3]]) as usize;
            assert_eq!(len % 4, 0, "tags stay 4-byte aligned");
            let mut v = b[4..4 + len].to_vec();
            while v.last() == Some(&0) && ty != TAG_P2P_DIRECTION {
                v.pop();
            }
            out.push((ty, v));
            b = &b[4 + len..];
            if ty == TAG_END {
                assert!(b.is_empty());
                return out;
            }
        }
    }

    #[test]
    fn header_names_the_dissector_and_ends() {
        let h = header("http", Some(RECEIVED), "socket 3 -> 4");
        let t = tags(&h);
        assert_eq!(t[0], (TAG_DISSECTOR_NAME, b"http".to_vec()));
        assert_eq!(t[1], (TAG_COL_PROT_TEXT, b"udsfs".to_vec()));
        assert_eq!(t[2], (TAG_P2P_DIRECTION, 1u32.to_be_bytes().to_vec()));
        assert_eq!(t[3], (TAG_COL_INFO_TEXT, b"socket 3 -> 4".to_vec()));
        assert_eq!(t[4], (TAG_END, vec![]));
    }

    #[test]
    fn long_info_is_cut_at_a_char_boundary() {
        // 199 ASCII bytes, then a two-byte character across MAX_TEXT.
        let info = format!("{}é and more", "x".repeat(MAX_TEXT - 1));
        let t = tags(&header("data", None, &info));
        assert_eq!(
            t[2],
            (TAG_COL_INFO_TEXT, info.as_bytes()[..MAX_TEXT - 1].to_vec())
        );
        let short = "ä".repeat(10);
        let t = tags(&header("data", None, &short));
        assert_eq!(t[2], (TAG_COL_INFO_TEXT, short.into_bytes()));
    }

    #[test]
    fn no_info_no_direction() {
        let t = tags(&header("data", None, ""));
        assert_eq!(t.len(), 3);
    }
}
