//! The memory Linux charges a queued AF_UNIX message (its skb's truesize),
//! which the sender's budget (SO_SNDBUF, sk_wmem_alloc) counts, and the
//! largest pieces a stream send is cut into: one definition for the
//! daemon's queues (src/engine/skb.rs) and the lane's rings (lane/ring.rs).

/// Room for data in a one-page skb head: SKB_MAX_HEAD(0).
const SKB_MAX_HEAD: usize = 4096 - 320;
/// Largest stream skb: one page of head plus UNIX_SKB_FRAGS_SZ (32 KiB).
pub const STREAM_SKB_MAX: usize = SKB_MAX_HEAD + 32768;
/// Largest linear dgram skb: SKB_MAX_ALLOC (order-2 pages less overhead).
const SKB_MAX_ALLOC: usize = 16384 - 320;
/// MAX_SKB_FRAGS pages.
const MAX_FRAG_BYTES: usize = 17 * 4096;

/// An skb's truesize: the kmalloc size class of the head (data aligned to
/// 64 plus 320 bytes of shared info), 256 for the sk_buff itself, and whole
/// pages for the fragments. A small message costs 768: 278 fill 212992.
fn skb_truesize(head: usize, frags: usize) -> usize {
    (head.next_multiple_of(64) + 320).next_power_of_two() + 256 + frags.next_multiple_of(4096)
}

/// A dgram or seqpacket message: linear up to SKB_MAX_ALLOC, paged beyond.
pub fn message_truesize(len: usize) -> usize {
    let frags = len.saturating_sub(SKB_MAX_ALLOC).min(MAX_FRAG_BYTES);
    skb_truesize(len - frags, frags)
}

/// A stream chunk: past one page of head, the rest goes to fragments.
pub fn stream_truesize(size: usize) -> usize {
    let frags = if size > SKB_MAX_HEAD {
        size.min((size - SKB_MAX_HEAD).next_multiple_of(4096))
    } else {
        0
    };
    skb_truesize(size - frags, frags)
}

/// unix_stream_sendmsg's largest skb for a send buffer of `sndbuf`: at
/// most half of it (less 64), at most STREAM_SKB_MAX. A send is cut into
/// chunks of this from its start.
pub fn stream_chunk_max(sndbuf: usize) -> usize {
    (sndbuf >> 1).saturating_sub(64).clamp(1, STREAM_SKB_MAX)
}

/// The largest dgram or seqpacket message a send buffer of `sndbuf` takes
/// (unix_dgram_sendmsg: EMSGSIZE past it).
pub fn message_max(sndbuf: usize) -> usize {
    sndbuf.saturating_sub(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_the_kernels() {
        // Measured on Linux (SIOCOUTQ, and sends until EAGAIN at 212992).
        assert_eq!(stream_truesize(100), 768);
        assert_eq!(212992usize.div_ceil(768), 278);
        // 4096-byte stream writes: 44 fill 212992 (180224 bytes).
        assert_eq!(212992usize.div_ceil(stream_truesize(4096)), 44);
        // 4096-byte seqpacket records: 26.
        assert_eq!(212992usize.div_ceil(message_truesize(4096)), 26);
        assert_eq!(stream_chunk_max(212992), STREAM_SKB_MAX);
        assert_eq!(stream_chunk_max(4608), 2240);
        assert_eq!(message_max(212992), 212960);
    }
}
