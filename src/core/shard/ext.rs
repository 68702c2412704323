//! A shard's extension: server subsystems that keep state on a shard and need to run
//! after each step and at their own deadlines (JetStream's streams and consumers: group
//! commit acknowledgements, redeliveries, pull request expiry).
//!
//! Ownership: the extension belongs to its shard and runs on the shard's thread. While it
//! runs it is taken out of the core, so a nested step (it publishes, which routes and
//! finishes) does not re-enter it; it reaches its own state again through
//! [`ShardCore::with_ext`] from internal subscription handlers and jobs.

use super::ShardCore;
use std::any::Any;
use std::time::Instant;

/// A subsystem living on a shard.
pub trait ShardExt: Any {
    /// After every step of the shard (cheap when there is nothing to do).
    fn after_step(&mut self, core: &mut ShardCore, now: Instant);
    /// The earliest moment [`ShardExt::tick`] has work.
    fn next_deadline(&self) -> Option<Instant>;
    /// Run what is due at `now`.
    fn tick(&mut self, core: &mut ShardCore, now: Instant);
    /// The shard's thread was woken: a storage completion may be ready (its deadline
    /// can come now).
    fn woken(&mut self, _now: Instant) {}
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl ShardCore {
    /// Install (or remove) this shard's extension.
    pub fn set_ext(&mut self, ext: Option<Box<dyn ShardExt>>) {
        self.ext = ext;
    }

    /// Run `f` with this shard's extension, if one is installed and not already running.
    pub fn with_ext<R>(&mut self, f: impl FnOnce(&mut dyn ShardExt, &mut ShardCore) -> R) -> Option<R> {
        let mut ext = self.ext.take()?;
        let outer = std::mem::replace(&mut self.ext_busy, true);
        let r = f(ext.as_mut(), self);
        self.ext_busy = outer;
        if self.ext.is_none() {
            self.ext = Some(ext);
        }
        Some(r)
    }

    /// The shard's thread was woken (see [`ShardExt::woken`]).
    pub fn woken(&mut self, now: Instant) {
        if let Some(e) = self.ext.as_mut() {
            e.woken(now);
        }
    }

    /// The eventfd storage backends signal to wake this shard (`None`: none; they are
    /// polled on a timer).
    pub fn io_wake(&self) -> Option<&storage::io::Wake> {
        self.io_wake.as_ref()
    }

    pub fn set_io_wake(&mut self, wake: Option<storage::io::Wake>) {
        self.io_wake = wake;
    }

    pub(super) fn ext_after_step(&mut self, now: Instant) {
        if self.ext.is_some() {
            self.with_ext(|e, core| e.after_step(core, now));
        }
    }

    pub(super) fn ext_deadline(&self) -> Option<Instant> {
        self.ext.as_ref().and_then(|e| e.next_deadline())
    }

    pub(super) fn ext_tick(&mut self, now: Instant) {
        if self.ext_deadline().is_some_and(|d| d <= now) {
            self.with_ext(|e, core| e.tick(core, now));
        }
    }
}
