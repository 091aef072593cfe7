//! The memory Linux charges a queued message (its skb's truesize), which
//! the sender's budget (SO_SNDBUF, sk_wmem_alloc) counts, and the largest
//! pieces a stream send is cut into: the kernel's figures are the proto
//! crate's (`udsfs_proto::skb`, which the lanes' rings charge by too); the
//! daemon's own cost of a fault's pieces is here.

pub(crate) use udsfs_proto::skb::{message_truesize, stream_chunk_max, stream_truesize};

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
