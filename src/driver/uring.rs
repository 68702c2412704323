//! The glommio glue: one pinned executor per shard, one task per connection.
//!
//! A connection task is a hand-written future that, each time it is polled, writes what
//! the core queued for it (one `send` per wake-up, however many messages), then reads and
//! feeds the core. The shard's control task accepts connections, drains the mesh, runs
//! timers and sleeps on the shard's wake socket. Tasks share the core through
//! `Rc<RefCell<..>>`; no borrow is ever held across an `.await`.

use super::{Accepted, Control, Controls, MeshAdapter, Running, RuntimeConfig, Stop, MESH_RING_CAPACITY};
use crate::core::client::{ClosedState, ConnKey};
use crate::core::shard::{ConnStatus, ShardCore};
use shards::futures_io::{AsyncRead, AsyncWrite};
use shards::glommio;
use shards::mesh::Notify;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::mpsc::Receiver;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Adaptive read buffer bounds (nats-server's: start 512, grow to 64 KiB).
const READ_START: usize = 512;
const READ_MIN: usize = 64;
const READ_MAX: usize = 64 * 1024;
/// Reads per poll before yielding to other tasks.
const READ_BUDGET: usize = 16;
/// How long a closing connection may take to flush.
const FLUSH_GRACE: Duration = Duration::from_millis(100);

/// Start `cfg.nshards` glommio shards serving `listener`.
pub fn start(cfg: RuntimeConfig, listener: std::net::TcpListener) -> io::Result<Running> {
    let n = cfg.nshards;
    let mut notifiers: Vec<Box<dyn Notify>> = Vec::with_capacity(n);
    let mut wake_fds = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = shards::notify::socket_notify()?;
        notifiers.push(Box::new(tx));
        wake_fds.push(rx);
    }
    let eps = shards::mesh::build::<Vec<u8>>(notifiers, MESH_RING_CAPACITY);
    let wakers = eps
        .first()
        .map(|e| e.waker())
        .ok_or_else(|| io::Error::other("no shards"))?;
    let stop = Stop::default();
    let io_memory = shards::uring::io_memory_per_shard(n);
    let (txs, rxs) = super::control_queues(n);
    let mut threads: Vec<Box<dyn FnOnce() + Send>> = Vec::with_capacity(n);
    for (i, ((ep, wake_fd), rx)) in eps.into_iter().zip(wake_fds).zip(rxs).enumerate() {
        let cfg2 = cfg.clone();
        let stop = stop.clone();
        let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[i % cfg.cpus.len()]);
        let ecfg = shards::uring::ExecutorConfig {
            cpu,
            name: format!("rnats-shard-{i}"),
            io_memory,
            spin_before_park: Duration::from_micros(cfg.spin_us),
        };
        let h = shards::uring::spawn_executor(ecfg, move || async move {
            let core = ShardCore::new(
                i,
                cfg2.nshards,
                cfg2.core.clone(),
                cfg2.shared.clone(),
                Box::new(MeshAdapter(ep)),
            );
            shard_main(core, wake_fd, rx, stop).await;
        })?;
        threads.push(Box::new(move || {
            let _ = h.join();
        }));
    }
    let controls = Controls::new(txs, wakers.clone());
    let acceptor = Running::accepting(listener, &controls)?;
    Ok(Running {
        stop,
        wakers,
        controls,
        acceptor,
        threads,
        name: "io_uring",
    })
}

struct Slot {
    gen: u32,
    waker: Option<Waker>,
    task: Option<glommio::task::JoinHandle<()>>,
}

/// State shared by the tasks of one shard.
struct Shard {
    core: RefCell<ShardCore>,
    slots: RefCell<Vec<Option<Slot>>>,
    scratch: RefCell<Vec<ConnKey>>,
    timer_waker: RefCell<Option<Waker>>,
    sleep_until: Cell<Option<Instant>>,
}

impl Shard {
    /// Wake the tasks of every connection the core pointed at (except `me`, which is
    /// running), and the timer task if a deadline moved earlier.
    fn dispatch(&self, me: Option<ConnKey>) {
        let mut list = self.scratch.borrow_mut();
        list.clear();
        let deadline = {
            let mut core = self.core.borrow_mut();
            core.drain_wakeups(|k| list.push(k));
            core.next_deadline()
        };
        {
            let slots = self.slots.borrow();
            for k in list.iter() {
                if Some(*k) == me {
                    continue;
                }
                if let Some(Some(s)) = slots.get(k.idx as usize) {
                    if s.gen == k.gen {
                        if let Some(w) = &s.waker {
                            w.wake_by_ref();
                        }
                    }
                }
            }
        }
        if let Some(d) = deadline {
            if self.sleep_until.get().is_none_or(|s| d < s) {
                if let Some(w) = self.timer_waker.borrow().as_ref() {
                    w.wake_by_ref();
                }
            }
        }
    }
}

async fn shard_main(core: ShardCore, wake_fd: OwnedFd, controls: Receiver<Control>, stop: Stop) {
    // The first timer of a process is slow (membarrier registration): take it now.
    glommio::timer::sleep(Duration::from_millis(1)).await;
    let shard = Rc::new(Shard {
        core: RefCell::new(core),
        slots: RefCell::new(Vec::new()),
        scratch: RefCell::new(Vec::new()),
        timer_waker: RefCell::new(None),
        sleep_until: Cell::new(None),
    });
    let timers = glommio::spawn_local(timer_task(shard.clone())).detach();
    // SAFETY: the fd is the read end of our own socketpair; ownership moves to glommio.
    let mut wake = unsafe { glommio::net::UnixStream::from_raw_fd(wake_fd.into_raw_fd()) };
    let mut drain = [0u8; 64];
    loop {
        let now = Instant::now();
        while let Ok(c) = controls.try_recv() {
            match c {
                Control::Accept(acc) => accept(&shard, acc, now),
                Control::Reconfigure(cfg) => shard.core.borrow_mut().reconfigure(cfg, now),
                Control::LameDuck => shard.core.borrow_mut().lame_duck(now),
                Control::CloseClients(n) => {
                    shard.core.borrow_mut().close_clients(n, now);
                }
            }
        }
        shard.core.borrow_mut().poll_mesh(now);
        shard.core.borrow_mut().flush_mesh(now);
        shard.dispatch(None);
        if stop.is_set() {
            break;
        }
        // Sleep until the wake socket says there is mesh work, a connection to accept,
        // or a shutdown. (Timers run in their own task, so that a mesh wake-up does not
        // create and cancel a kernel timer each time.)
        if !shard.core.borrow().mesh_prepare_park() {
            glommio::yield_if_needed().await;
            continue;
        }
        std::future::poll_fn(|cx| Pin::new(&mut wake).poll_read(cx, &mut drain).map(|_| ())).await;
        shard.core.borrow().mesh_unpark();
    }
    timers.cancel();
    // Shutdown: close every client (they flush briefly), then cancel what is left.
    shard.core.borrow_mut().shutdown(Instant::now());
    shard.dispatch(None);
    let start = Instant::now();
    while shard.core.borrow().connections() > 0 && start.elapsed() < Duration::from_secs(1) {
        glommio::timer::sleep(Duration::from_millis(5)).await;
        shard.dispatch(None);
    }
    let slots = std::mem::take(&mut *shard.slots.borrow_mut());
    for s in slots.into_iter().flatten() {
        if let Some(t) = s.task {
            t.cancel();
        }
    }
}

/// Runs the core's timers. It sleeps until the next deadline and is woken early by
/// [`Shard::dispatch`] only when a deadline moved before the one it sleeps for.
async fn timer_task(shard: Rc<Shard>) {
    loop {
        let now = Instant::now();
        if shard.core.borrow_mut().next_deadline().is_some_and(|d| d <= now) {
            shard.core.borrow_mut().tick(now);
            shard.dispatch(None);
        }
        let until = shard
            .core
            .borrow_mut()
            .next_deadline()
            .unwrap_or(now + Duration::from_secs(1))
            .min(now + Duration::from_secs(1));
        shard.sleep_until.set(Some(until));
        let timer = glommio::timer::sleep(until.saturating_duration_since(now));
        let mut timer = std::pin::pin!(timer);
        std::future::poll_fn(|cx| {
            *shard.timer_waker.borrow_mut() = Some(cx.waker().clone());
            if timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            if shard.core.borrow_mut().next_deadline().is_some_and(|d| d < until) {
                return Poll::Ready(());
            }
            Poll::Pending
        })
        .await;
    }
}

fn accept(shard: &Rc<Shard>, acc: Accepted, now: Instant) {
    // SAFETY: the fd comes from a std TcpStream we own; ownership moves to glommio.
    let stream = unsafe { glommio::net::TcpStream::from_raw_fd(acc.stream.into_raw_fd()) };
    let key = shard.core.borrow_mut().accept(acc.peer, now);
    // The slot exists before the task first runs, so the task's first poll records its
    // waker (a connection that never sends anything must still be woken by timers).
    {
        let mut slots = shard.slots.borrow_mut();
        let i = key.idx as usize;
        if slots.len() <= i {
            slots.resize_with(i + 1, || None);
        }
        slots[i] = Some(Slot {
            gen: key.gen,
            waker: None,
            task: None,
        });
    }
    let task = glommio::spawn_local(ConnTask {
        key,
        stream,
        shard: shard.clone(),
        buf: vec![0u8; READ_START],
        short_reads: 0,
        closing_since: None,
    })
    .detach();
    if let Some(Some(s)) = shard.slots.borrow_mut().get_mut(key.idx as usize) {
        if s.gen == key.gen {
            s.task = Some(task);
        }
    }
}

struct ConnTask {
    key: ConnKey,
    stream: glommio::net::TcpStream,
    shard: Rc<Shard>,
    buf: Vec<u8>,
    short_reads: u32,
    closing_since: Option<Instant>,
}

enum Step {
    Again,
    Wait,
    Done,
}

impl ConnTask {
    fn register(&self, cx: &Context<'_>) {
        let mut slots = self.shard.slots.borrow_mut();
        if let Some(Some(s)) = slots.get_mut(self.key.idx as usize) {
            if s.gen == self.key.gen && !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                s.waker = Some(cx.waker().clone());
            }
        }
    }

    fn finish(&mut self) {
        self.shard.core.borrow_mut().remove(self.key, Instant::now());
        let mut slots = self.shard.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(self.key.idx as usize) {
            if slot.as_ref().is_some_and(|s| s.gen == self.key.gen) {
                *slot = None;
            }
        }
        drop(slots);
        self.shard.dispatch(Some(self.key));
    }

    /// Write queued output until done or the socket is full.
    fn write(&mut self, cx: &mut Context<'_>, now: Instant) {
        loop {
            let r = {
                let core = self.shard.core.borrow();
                let out = core.output(self.key);
                if out.is_empty() {
                    return;
                }
                Pin::new(&mut self.stream).poll_write(cx, out)
            };
            let mut core = self.shard.core.borrow_mut();
            match r {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    core.disconnected(self.key, ClosedState::WriteError, now);
                    return;
                }
                Poll::Ready(Ok(n)) => core.written(self.key, n, now),
                Poll::Pending => {
                    core.written(self.key, 0, now);
                    return;
                }
            }
        }
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Step {
        let now = Instant::now();
        let status = self.shard.core.borrow().status(self.key);
        match status {
            ConnStatus::Gone | ConnStatus::Close => return Step::Done,
            ConnStatus::Flush => {
                self.write(cx, now);
                let first = self.closing_since.is_none();
                let since = *self.closing_since.get_or_insert(now);
                return match self.shard.core.borrow().status(self.key) {
                    ConnStatus::Flush if now.duration_since(since) < FLUSH_GRACE => {
                        // Socket full: poll_write registered us for writability; also
                        // come back when the grace period ends.
                        if first {
                            let w = cx.waker().clone();
                            glommio::spawn_local(async move {
                                glommio::timer::sleep(FLUSH_GRACE).await;
                                w.wake();
                            })
                            .detach();
                        }
                        Step::Wait
                    }
                    _ => Step::Done,
                };
            }
            ConnStatus::Open { read } => {
                self.write(cx, now);
                if !read {
                    return Step::Wait;
                }
            }
        }
        {
            match Pin::new(&mut self.stream).poll_read(cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => {
                    self.shard
                        .core
                        .borrow_mut()
                        .disconnected(self.key, ClosedState::ClientClosed, now);
                    self.shard.dispatch(Some(self.key));
                    Step::Again
                }
                Poll::Ready(Ok(n)) => {
                    let data = self.buf.get(..n).unwrap_or_default();
                    self.shard.core.borrow_mut().input(self.key, data, now);
                    self.shard.dispatch(Some(self.key));
                    self.adapt(n);
                    // Output or a pause may follow: go round again.
                    Step::Again
                }
                Poll::Ready(Err(_)) => {
                    self.shard
                        .core
                        .borrow_mut()
                        .disconnected(self.key, ClosedState::ReadError, now);
                    self.shard.dispatch(Some(self.key));
                    Step::Again
                }
                Poll::Pending => Step::Wait,
            }
        }
    }

    /// Grow the read buffer when reads fill it, shrink it after repeated short reads.
    fn adapt(&mut self, n: usize) {
        let cap = self.buf.len();
        if n >= cap {
            self.short_reads = 0;
            if cap < READ_MAX {
                self.buf = vec![0u8; cap * 2];
            }
        } else if n < cap / 2 {
            self.short_reads += 1;
            if cap > READ_MIN && self.short_reads > 2 {
                self.buf = vec![0u8; cap / 2];
                self.short_reads = 0;
            }
        }
    }
}

impl Future for ConnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.register(cx);
        for _ in 0..READ_BUDGET {
            match this.step(cx) {
                Step::Again => continue,
                Step::Wait => return Poll::Pending,
                Step::Done => {
                    this.finish();
                    return Poll::Ready(());
                }
            }
        }
        // Fairness: let other connections run, then continue.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
