//! The mio reactor's pieces: a shard's `Poll` with its wake-up token, and the mesh
//! notifier over `mio::Waker`.

use mio::{Poll, Token, Waker};
use shards::mesh::Notify;
use std::io;
use std::sync::Arc;

/// The token reserved for mesh and shutdown wake-ups in every shard's `Poll`.
pub const WAKE_TOKEN: Token = Token(usize::MAX);

/// A mesh notifier backed by `mio::Waker` (eventfd on Linux, kqueue on BSD/macOS,
/// IOCP on Windows).
pub struct MioNotify(pub Arc<Waker>);

impl Notify for MioNotify {
    fn notify(&self) {
        let _ = self.0.wake();
    }
}

/// A shard's poller and the waker that interrupts it.
pub struct ShardPoll {
    pub poll: Poll,
    pub waker: Arc<Waker>,
}

/// Create a poller with a waker registered under [`WAKE_TOKEN`].
pub fn shard_poll() -> io::Result<ShardPoll> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE_TOKEN)?);
    Ok(ShardPoll { poll, waker })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::Events;
    use std::time::Duration;

    #[test]
    fn waker_interrupts_poll_from_another_thread() {
        let mut sp = shard_poll().unwrap();
        let n = MioNotify(sp.waker.clone());
        let t = std::thread::spawn(move || n.notify());
        let mut events = Events::with_capacity(4);
        sp.poll.poll(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert!(events.iter().any(|e| e.token() == WAKE_TOKEN));
        t.join().unwrap();
    }
}
