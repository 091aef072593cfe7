//! The memory Linux charges a queued message (its skb's truesize), which
//! the sender's budget (SO_SNDBUF, sk_wmem_alloc) counts, and the largest
//! pieces a stream send is cut into.

/// Room for data in a one-page skb head: SKB_MAX_HEAD(0).
const SKB_MAX_HEAD: usize = 4096 - 320;
/// Largest stream skb: one page of head plus UNIX_SKB_FRAGS_SZ (32 KiB).
pub(crate) const STREAM_SKB_MAX: usize = SKB_MAX_HEAD + 32768;
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
pub(crate) fn message_truesize(len: usize) -> usize {
    let frags = len.saturating_sub(SKB_MAX_ALLOC).min(MAX_FRAG_BYTES);
    skb_truesize(len - frags, frags)
}

/// A stream chunk: past one page of head, the rest goes to fragments.
pub(crate) fn stream_truesize(size: usize) -> usize {
    let frags = if size > SKB_MAX_HEAD {
        size.min((size - SKB_MAX_HEAD).next_multiple_of(4096))
    } else {
        0
    };
    skb_truesize(size - frags, frags)
}
