//! The daemon's mover for a lane `Through` the daemon (docs/LANE.md stage
//! d): the bytes one end wrote into its own region's outgoing ring, moved
//! into the other end's region's incoming ring, each chunk shown to `each`
//! (the capture taps) on its way. Each end's region is a lane whose other
//! side is the daemon, so to the end's library it is a direct lane.
//!
//! The reader is the checked one of `ring` (a corrupt source is
//! `Corrupt`, sticky: the connection is reset), the writer the ordinary
//! one. Nothing is dropped: a full destination stops the pump with the
//! bytes still in the source ring (back-pressure: the source's writer
//! sees its ring fill). A record is moved only whole, once the
//! destination has room for all of it. The source writer's end (`fin`,
//! after its last byte) is passed on after the bytes before it.

use super::ring::{Framing, LaneErr, Reader, Writer};

/// What one `pump` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pumped {
    /// Bytes (a stream's) or records' payload bytes moved.
    pub bytes: usize,
    /// Whether the source's end was passed on (all its bytes moved).
    pub fin: bool,
    /// Whether the destination was full with bytes still to move.
    pub full: bool,
}

/// Which side of a pump broke: the source ring (its writer scribbled) or
/// the destination (its reader did).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PumpErr {
    Source(LaneErr),
    Dest(LaneErr),
}

/// Moves what `from` holds into `to`, at most `budget` bytes, through
/// `buf` (at least the largest record `from` may hold: its capacity;
/// a stream pumps in `buf`-sized chunks), calling `each` on every chunk
/// (a record: once, whole) before it is written on. Stops when the
/// source is empty, the destination full, or the budget spent.
pub fn pump(
    from: &mut Reader<'_>,
    to: &mut Writer<'_>,
    framing: Framing,
    buf: &mut [u8],
    budget: usize,
    mut each: impl FnMut(&[u8]),
) -> Result<Pumped, PumpErr> {
    let mut out = Pumped::default();
    while out.bytes < budget {
        let room = to.free().map_err(PumpErr::Dest)? as usize;
        match framing {
            Framing::Stream => {
                let want = room.min(buf.len()).min(budget - out.bytes);
                if want == 0 {
                    // Still look for the source's end: a full ring with
                    // nothing to move is not full for the pump.
                    let left = from.available().map_err(PumpErr::Source)?;
                    out.full = left > 0;
                    if left == 0 {
                        out.fin = pass_fin(from, to, &mut [])?;
                    }
                    return Ok(out);
                }
                match from.read(&mut buf[..want], false) {
                    Ok(0) => {
                        to.shutdown();
                        out.fin = true;
                        return Ok(out);
                    }
                    Ok(n) => {
                        each(&buf[..n]);
                        let w = to.write(&buf[..n]).map_err(PumpErr::Dest)?;
                        if w != n {
                            // free() said there was room and only we
                            // write: the reader lied about its head.
                            return Err(PumpErr::Dest(LaneErr::Corrupt(
                                "room the reader gave back",
                            )));
                        }
                        out.bytes += n;
                    }
                    Err(LaneErr::WouldBlock) => return Ok(out),
                    Err(e) => return Err(PumpErr::Source(e)),
                }
            }
            Framing::Record => {
                let len = match from.available() {
                    Ok(0) => {
                        out.fin = pass_fin(from, to, buf)?;
                        return Ok(out);
                    }
                    Ok(n) => n as usize,
                    Err(e) => return Err(PumpErr::Source(e)),
                };
                if len > buf.len() || len > to.capacity() as usize - 4 {
                    return Err(PumpErr::Source(LaneErr::Corrupt(
                        "a record past the rings' size",
                    )));
                }
                if room < 4 + len.next_multiple_of(4) {
                    out.full = true;
                    return Ok(out);
                }
                match from.read_record(&mut buf[..len], false) {
                    Ok(Some(r)) if r.copied == len && r.len == len => {
                        each(&buf[..len]);
                        to.write(&buf[..len]).map_err(PumpErr::Dest)?;
                        out.bytes += len.max(1);
                    }
                    Ok(_) => {
                        return Err(PumpErr::Source(LaneErr::Corrupt(
                            "a record changed under its read",
                        )));
                    }
                    Err(LaneErr::WouldBlock) => return Ok(out),
                    Err(e) => return Err(PumpErr::Source(e)),
                }
            }
        }
    }
    Ok(out)
}

/// With nothing left to move: the source's end passed on if it came.
fn pass_fin(from: &mut Reader<'_>, to: &mut Writer<'_>, buf: &mut [u8]) -> Result<bool, PumpErr> {
    let _ = buf;
    let ended = from.ended().map_err(PumpErr::Source)?;
    if ended {
        to.shutdown();
    }
    Ok(ended)
}
