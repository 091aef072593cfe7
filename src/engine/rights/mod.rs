//! Passing sockets and files (SCM_RIGHTS): taking what a send passes
//! (hold.rs), handing it to the reader (deliver.rs), and the depot that
//! holds passed files meanwhile (src/engine/depot.rs, a module of its own
//! so that queues can hold its files without depending on this one).
//! While queued, passed sockets are in flight for the collector
//! (src/engine/gc.rs).

mod deliver;
mod hold;

pub use super::depot::{Depot, FILE_TAG, PassedFile, is_file_tag};
pub use deliver::merge_in_order;
