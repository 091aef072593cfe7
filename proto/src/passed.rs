//! What a message passes, as one u64 each: a udsfs socket by its number, or
//! a file the daemon holds by its depot tag, which has `FILE_TAG` set (the
//! depot, src/engine/depot.rs, makes the tags). A socket whose sender's
//! descriptor was O_NONBLOCK has `NONBLOCK_TAG` set too (`socket_item`):
//! Linux passes the open file description, O_NONBLOCK with it, and the
//! receiver opens the socket's data file anew, nonblocking when this says
//! so. In `msg` records a list of them is `rights=ITEM,...`, a file written
//! `file:T` (its tag without the bit), a nonblocking socket `nb:N`.

use crate::{Res, SCM_MAX_FD};

/// Bit 63 marks a file the daemon holds among socket numbers.
pub const FILE_TAG: u64 = 1 << 63;

pub fn is_file_tag(id: u64) -> bool {
    id & FILE_TAG != 0
}

/// Bit 62 marks a socket passed from an O_NONBLOCK descriptor.
pub const NONBLOCK_TAG: u64 = 1 << 62;

/// The item of udsfs socket `number` passed from descriptor `fd` (the
/// sender's, or a copy sharing its file description): `NONBLOCK_TAG` when
/// `fd` is O_NONBLOCK. Both fronts make their socket items here.
pub fn socket_item(number: u64, fd: i32) -> u64 {
    // SAFETY: F_GETFL only asks.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
        number | NONBLOCK_TAG
    } else {
        number
    }
}

/// A socket item's number and whether it is to be opened nonblocking.
pub fn socket_of(id: u64) -> (u64, bool) {
    (id & !NONBLOCK_TAG, id & NONBLOCK_TAG != 0)
}

/// One item of `rights=`: a socket number, or `file:T`.
pub fn parse_item(v: &str) -> Res<u64> {
    let (n, tag) = if let Some(t) = v.strip_prefix("file:") {
        (t, FILE_TAG)
    } else if let Some(t) = v.strip_prefix("nb:") {
        (t, NONBLOCK_TAG)
    } else {
        (v, 0)
    };
    let n = digits::<u64>(n)?;
    // A file's tag is any 63 bits (the depot's are random: half have bit
    // 62); only a socket's number leaves NONBLOCK_TAG's bit for the flag.
    let reserved = if tag == FILE_TAG {
        FILE_TAG
    } else {
        FILE_TAG | NONBLOCK_TAG
    };
    if n & reserved != 0 {
        return Err(libc::EINVAL);
    }
    Ok(n | tag)
}

pub fn format_item(id: u64) -> String {
    if is_file_tag(id) {
        format!("file:{}", id & !FILE_TAG)
    } else if id & NONBLOCK_TAG != 0 {
        format!("nb:{}", id & !NONBLOCK_TAG)
    } else {
        id.to_string()
    }
}

/// The value of `rights=`: at most SCM_MAX_FD items, empty ones skipped.
pub fn parse_list(v: &str) -> Res<Vec<u64>> {
    let items = v
        .split(',')
        .filter(|s| !s.is_empty())
        .map(parse_item)
        .collect::<Res<Vec<u64>>>()?;
    if items.len() > SCM_MAX_FD {
        return Err(libc::EINVAL);
    }
    Ok(items)
}

pub fn format_list(ids: &[u64]) -> String {
    let items: Vec<String> = ids.iter().map(|&id| format_item(id)).collect();
    items.join(",")
}

/// A decimal number written as digits only (no sign, no spaces).
pub(crate) fn digits<T: std::str::FromStr>(v: &str) -> Res<T> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(libc::EINVAL);
    }
    v.parse().map_err(|_| libc::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip() {
        for id in [
            0,
            7,
            FILE_TAG | 5,
            FILE_TAG,
            u64::MAX >> 2,
            NONBLOCK_TAG | 7,
        ] {
            assert_eq!(parse_item(&format_item(id)), Ok(id));
        }
        assert_eq!(format_item(FILE_TAG | 5), "file:5");
        assert_eq!(format_item(NONBLOCK_TAG | 5), "nb:5");
        assert_eq!(socket_of(NONBLOCK_TAG | 5), (5, true));
        assert_eq!(socket_of(5), (5, false));
        let ids = [3, FILE_TAG | 9, 4];
        assert_eq!(format_list(&ids), "3,file:9,4");
        assert_eq!(parse_list(&format_list(&ids)), Ok(ids.to_vec()));
        assert_eq!(parse_list("3,,4"), Ok(vec![3, 4]));
    }

    #[test]
    fn bad_items_are_einval() {
        crate::assert_all_einval(
            parse_item,
            &[
                "",
                "-1",
                "+1",
                "x",
                "file:",
                "file:-2",
                "9223372036854775813",
                "file:9223372036854775808",
                "nb:",
                "nb:file:3",
                "file:nb:3",
                "nb:4611686018427387904",
                "4611686018427387904",
                "18446744073709551616",
            ],
        );
        // A depot tag with bit 62 set is a file's, not a nonblocking one.
        let high = (1u64 << 62) | 5;
        assert_eq!(parse_item(&format!("file:{high}")), Ok(FILE_TAG | high));
        assert_eq!(format_item(FILE_TAG | high), format!("file:{high}"));
        let many: Vec<String> = (0..254).map(|i| i.to_string()).collect();
        assert_eq!(parse_list(&many.join(",")), Err(libc::EINVAL));
        assert_eq!(parse_list(&many[..253].join(",")).map(|v| v.len()), Ok(253));
    }
}
