//! The acceptor thread over a multishot accept (`shards::uring_accept`; Linux, feature
//! `uring`; used when the shards run on io_uring). The ring is made on the acceptor
//! thread itself (it is that thread's alone: single issuer, task work deferred to its
//! waits). Where the kernel lacks multishot accept [`spawn`] hands the hand-off back and
//! the caller uses the mio acceptor.

use super::accept::Handoff;
use shards::uring_accept::{AcceptRing, AcceptStop};
use std::io;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Why [`spawn`] did not start accepting.
pub(super) enum SpawnError {
    /// No ring or no multishot accept here: the hand-off comes back for the mio acceptor.
    Unavailable(io::Error, Handoff),
    /// The thread could not be started.
    Failed(io::Error),
}

/// Start accepting on `listener` in a thread of its own; returns the thread and what
/// wakes it to stop (after `stop` is set).
pub(super) fn spawn(
    listener: &TcpListener,
    handoff: Handoff,
    stop: Arc<AtomicBool>,
) -> Result<(JoinHandle<()>, AcceptStop), SpawnError> {
    let l = match listener.try_clone() {
        Ok(l) => l,
        Err(e) => return Err(SpawnError::Unavailable(e, handoff)),
    };
    let (tx, rx) = channel::<Result<AcceptStop, (io::Error, Handoff)>>();
    let thread = std::thread::Builder::new()
        .name("acceptor".into())
        .spawn(move || {
            let mut handoff = handoff;
            let mut ring = match AcceptRing::new(l) {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err((e, handoff)));
                    return;
                }
            };
            if tx.send(Ok(ring.stopper())).is_err() {
                return;
            }
            let (mut conns, mut errs) = (Vec::new(), Vec::new());
            loop {
                let woken = ring.wait(&mut conns, &mut errs);
                let stopping = woken || stop.load(Ordering::SeqCst);
                for s in conns.drain(..) {
                    if !stopping {
                        // Non-blocking already (the accept's flags).
                        handoff.hand(s, None);
                    }
                }
                if stopping {
                    return;
                }
                if let Some(e) = errs.drain(..).next_back() {
                    tracing::error!("Temporary Client Accept Error({e}), sleeping 10ms");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        })
        .map_err(SpawnError::Failed)?;
    match rx.recv() {
        Ok(Ok(stopper)) => Ok((thread, stopper)),
        Ok(Err((e, handoff))) => {
            let _ = thread.join();
            Err(SpawnError::Unavailable(e, handoff))
        }
        Err(_) => {
            let _ = thread.join();
            Err(SpawnError::Failed(io::Error::other(
                "acceptor thread ended at its start",
            )))
        }
    }
}
