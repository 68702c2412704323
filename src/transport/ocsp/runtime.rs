//! The threads OCSP work runs on: one small tokio runtime for the process, started the
//! first time a server needs it (stapling monitors sleep there between refreshes, peer
//! checks wait for responders there). Never a shard thread: a responder that takes
//! seconds must not stall clients.

use std::sync::OnceLock;

static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();

/// The OCSP runtime's handle (`None` if its threads could not be started).
pub fn handle() -> Option<tokio::runtime::Handle> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("ocsp")
                .enable_all()
                .build()
                .map_err(|e| tracing::error!("OCSP: cannot start its runtime: {e}"))
                .ok()
        })
        .as_ref()
        .map(|r| r.handle().clone())
}

/// Run `f` to completion and wait for it (server startup). The wait happens on a thread
/// of its own, so a caller inside some other async context does not matter.
pub fn block_on<F>(f: F) -> Option<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let h = handle()?;
    std::thread::scope(|s| s.spawn(|| h.block_on(f)).join().ok())
}
