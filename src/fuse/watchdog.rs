//! The watchdog: answers EAGAIN (or what a write got out) to parked requests
//! whose socket timeout (SO_RCVTIMEO / SO_SNDTIMEO) ran out, after a last
//! look (`ParkTable::expire`). It sleeps until
//! the soonest deadline, and is woken when a sooner one is parked, so it costs
//! nothing while requests wait without one.
//!
//! Signals are not its business: the kernel sends FUSE_INTERRUPT for the one
//! request a signal interrupts, SIGKILL included (`UdsFs::interrupt` in
//! adapter.rs, `ParkTable::interrupt_request` in park.rs).

use std::sync::Weak;
use std::time::{Duration, Instant};

use super::park::{Park, ParkTable};

/// Longest sleep with no deadline pending: only to notice the park table is gone.
const IDLE: Duration = Duration::from_secs(5);

/// Runs the watchdog until the park table is dropped.
pub fn spawn<P: Park>(table: Weak<ParkTable<P>>) {
    std::thread::Builder::new()
        .name("udsfs-watchdog".into())
        .spawn(move || {
            loop {
                let Some(t) = table.upgrade() else { return };
                let now = Instant::now();
                t.expire(now);
                let until = t
                    .next_deadline()
                    .map_or(now + IDLE, |at| at.min(now + IDLE));
                let alarm = t.alarm();
                drop(t);
                alarm.sleep_until(until);
            }
        })
        .expect("spawn watchdog");
}
