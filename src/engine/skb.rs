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

/// What each piece past the first of a stream chunk that a fault (slicer)
/// cuts costs. A piece is a queued message of its own in the daemon: its
/// `Msg` (200 bytes with its bytes' heap block), its slot in a queue that
/// grows by doubling and, when it is due later, a timer entry. The sender's
/// budget and `--max-queued-bytes` must see that: uncharged, one byte per
/// piece made the 233152 bytes one pair may queue hold some 50 MB.
pub(crate) const SLICE_PIECE_CHARGE: usize = 512;

/// `size` bytes of a stream chunk from `at` on (0: a chunk of its own; past
/// 0: what a chunk begun with `at` bytes grows by when a later ioctl of the
/// same call fills it further), queued as `pieces` pieces.
pub(crate) fn sliced_truesize(at: usize, size: usize, pieces: usize) -> usize {
    let grown = match at {
        0 => stream_truesize(size),
        // At least a piece's own cost: a piece is a queued message.
        _ => (stream_truesize(at + size) - stream_truesize(at)).max(SLICE_PIECE_CHARGE),
    };
    grown + pieces.saturating_sub(1) * SLICE_PIECE_CHARGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fault::held::Until;
    use crate::engine::socket::Msg;

    #[test]
    fn a_slice_piece_is_charged_at_least_what_it_holds() {
        // A queue slot twice over (the queue doubles), the allocator's
        // smallest block for its byte, and a timer entry twice over.
        let held = 2 * std::mem::size_of::<(Msg, Until)>() + 32 + 2 * 48;
        assert!(held <= SLICE_PIECE_CHARGE, "a piece holds {held} bytes");
        assert_eq!(sliced_truesize(0, 36544, 1), stream_truesize(36544));
        assert_eq!(
            sliced_truesize(0, 36544, 36544),
            stream_truesize(36544) + 36543 * SLICE_PIECE_CHARGE
        );
    }

    #[test]
    fn a_chunk_filled_by_several_ioctls_costs_what_one_skb_does() {
        // A front's pieces of 14176 bytes (MSG_ROOM) fill 36544-byte skbs.
        let whole = stream_truesize(36544);
        let parts = sliced_truesize(0, 14176, 1)
            + sliced_truesize(14176, 14176, 1)
            + sliced_truesize(28352, 8192, 1);
        println!("one skb {whole}, as three ioctls' pieces {parts}");
        assert_eq!(parts, whole);
        // A continuing piece never costs less than a queued message does.
        assert_eq!(sliced_truesize(5000, 1, 1), SLICE_PIECE_CHARGE);
    }
}
