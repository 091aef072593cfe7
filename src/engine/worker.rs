//! One engine thread started at its first use (the lane drainer, the
//! release thread): it holds the engine weakly, so that it ends once the
//! engine is dropped, and a failure to start it is logged, not fatal (the
//! work waits in its queue).

use std::sync::{Arc, OnceLock, Weak};

use super::Engine;

#[derive(Default)]
pub(crate) struct Worker {
    started: OnceLock<()>,
    engine: OnceLock<Weak<Engine>>,
}

impl Worker {
    /// Set once the engine is in its Arc (the thread holds it weakly).
    pub(crate) fn attach(&self, eng: &Arc<Engine>) {
        let _ = self.engine.set(Arc::downgrade(eng));
    }

    /// The engine is attached: a thread started now would have one.
    pub(crate) fn attached(&self) -> bool {
        self.engine.get().is_some()
    }

    /// Starts thread `name` running `body` the first time it is called;
    /// `what` names it in the log line if it cannot start.
    pub(crate) fn start(&self, name: &str, what: &str, body: fn(&Weak<Engine>)) {
        self.started.get_or_init(|| {
            let eng = self.engine.get().cloned().unwrap_or_default();
            let spawned = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || body(&eng));
            if let Err(e) = spawned {
                log::error!("no {what} thread: {e}");
            }
        });
    }
}
