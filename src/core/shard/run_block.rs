//! A run given to each subscriber whole, its frames put together once.
//!
//! Delivered payload by payload, a run costs each subscriber a lookup of its connection,
//! a reservation, five appends and the counters per message. When no two of a run's
//! subscribers share a connection and the whole run fits under each one's pending limit,
//! the order between subscribers cannot be told and none becomes a slow consumer part way,
//! so each gets the whole run in one go. The frames (`MSG <subject> <sid> [<reply> ]<size>
//! \r\n<payload>\r\n`) differ between subscribers only in the sid: they are put together
//! once in blocks of at most [`BLOCK_MAX`] bytes for the first subscriber, and each other
//! subscriber whose sid has the same length gets a copy of each block with its sid written
//! over the first one's. A subscriber whose sid is longer or shorter gets its frames one by
//! one. A fan-out profile had the per-message deliveries at two thirds of the server's
//! instructions.
//!
//! Ownership: the block and its sid offsets belong to the shard (`ShardCore::run_block`),
//! taken out while a run is written.

use super::run_deliver::Target;
use super::ShardCore;
use crate::core::mesh_run::RunRecord;
use std::time::Instant;

/// The largest block of frames put together at once (well within an output chunk).
const BLOCK_MAX: usize = 16 * 1024;

/// Subscribers past which a run is not checked for connections with two of them (the
/// check is by pairs), and goes payload by payload.
const WHOLE_RUN_MAX_TARGETS: usize = 32;

/// A block of frames for the first subscriber, and where its sid is in each frame.
#[derive(Default)]
pub(super) struct RunBlock {
    frames: Vec<u8>,
    sid_at: Vec<usize>,
}

/// A payload's size as text, formatted again only when it changes.
struct SizeText {
    buf: itoa::Buffer,
    len: usize,
    text: [u8; 20],
    n: usize,
}

impl SizeText {
    fn new() -> Self {
        SizeText {
            buf: itoa::Buffer::new(),
            len: usize::MAX,
            text: [0; 20],
            n: 0,
        }
    }

    #[inline(always)]
    fn of(&mut self, len: usize) -> &[u8] {
        if len != self.len {
            let t = self.buf.format(len).as_bytes();
            self.n = t.len().min(self.text.len());
            if let (Some(dst), Some(src)) = (self.text.get_mut(..self.n), t.get(..self.n)) {
                dst.copy_from_slice(src);
            }
            self.len = len;
        }
        self.text.get(..self.n).unwrap_or_default()
    }
}

impl ShardCore {
    /// How many payloads `run` has, if each of `plain` can be given the whole run at once
    /// rather than payload by payload: no two of `all` (the queue members too) are one
    /// connection (whose deliveries interleave), and the run fits under every one's
    /// pending limit (so none becomes a slow consumer part way, and interest cannot change
    /// meanwhile).
    pub(super) fn whole_runs_fit(&self, all: &[Target], plain: &[Target], run: &RunRecord<'_>) -> Option<usize> {
        if plain.is_empty() || all.len() > WHOLE_RUN_MAX_TARGETS {
            return None;
        }
        for (i, a) in all.iter().enumerate() {
            if all.get(i + 1..).unwrap_or_default().iter().any(|b| b.conn == a.conn) {
                return None;
            }
        }
        let (mut count, mut bytes) = (0usize, 0usize);
        for data in run.payloads() {
            count += 1;
            bytes += data.len();
        }
        let max_pending = self.cfg.max_pending;
        plain
            .iter()
            .all(|t| {
                self.client(t.conn)
                    .is_some_and(|c| c.out.len() + count * t.need + bytes <= max_pending)
            })
            .then_some(count)
    }

    /// Each of `plain` (see `whole_runs_fit`) gets all of `run`: through shared blocks
    /// when there are several, frame by frame when one.
    pub(super) fn write_whole_runs(&mut self, plain: &[Target], heads: &[u8], run: &RunRecord<'_>, now: Instant) {
        let head_of = |t: &Target| heads.get(t.at..t.end).unwrap_or_default();
        let [first, others @ ..] = plain else { return };
        if others.is_empty() {
            self.write_frames(first, head_of(first), run.payloads(), now);
            return;
        }
        let head0 = head_of(first);
        // The sid follows `MSG <subject> ` in every head.
        let sid_off = 4 + run.shape.subject.len() + 1;
        let mut block = std::mem::take(&mut self.run_block);
        let mut rest = run.payloads();
        let mut size = SizeText::new();
        loop {
            let segment = rest.clone();
            block.frames.clear();
            block.sid_at.clear();
            let (mut count, mut bytes) = (0u64, 0u64);
            loop {
                let mut probe = rest.clone();
                let Some(data) = probe.next() else { break };
                if !block.frames.is_empty() && block.frames.len() + head0.len() + 24 + data.len() > BLOCK_MAX {
                    break;
                }
                rest = probe;
                block.sid_at.push(block.frames.len() + sid_off);
                block.frames.extend_from_slice(head0);
                block.frames.extend_from_slice(size.of(data.len()));
                super::route::finish_frame(&mut block.frames, data);
                count += 1;
                bytes += data.len() as u64;
            }
            if count == 0 {
                break;
            }
            self.write_block(first, &block, None, count, bytes, now);
            for t in others {
                let head = head_of(t);
                if head.len() == head0.len() {
                    let sid = head.get(sid_off..sid_off + t.sid_len).unwrap_or_default();
                    self.write_block(t, &block, Some(sid), count, bytes, now);
                } else {
                    self.write_frames(t, head, segment.clone().take(count as usize), now);
                }
            }
        }
        self.run_block = block;
    }

    /// A copy of `block` (`count` messages, `bytes` of payload) to `t`'s connection, with
    /// `sid` (as long as the first subscriber's) in place of the first subscriber's.
    fn write_block(&mut self, t: &Target, block: &RunBlock, sid: Option<&[u8]>, count: u64, bytes: u64, now: Instant) {
        let Some(c) = self.open_target(t) else { return };
        {
            let mut w = c.out.frame(block.frames.len(), now);
            let base = w.len();
            w.extend_from_slice(&block.frames);
            if let Some(sid) = sid {
                for &at in &block.sid_at {
                    if let Some(dst) = w.get_mut(base + at..base + at + sid.len()) {
                        super::fan::overwrite(dst, sid);
                    }
                }
            }
        }
        self.count_run(t, count, bytes);
    }

    /// `payloads` to `t`'s connection frame by frame, each after `head`.
    fn write_frames<'p>(&mut self, t: &Target, head: &[u8], payloads: impl Iterator<Item = &'p [u8]>, now: Instant) {
        let Some(c) = self.open_target(t) else { return };
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut size = SizeText::new();
        for data in payloads {
            let mut w = c.out.frame(t.need + data.len(), now);
            w.extend_from_slice(head);
            w.extend_from_slice(size.of(data.len()));
            super::route::finish_frame(&mut w, data);
            count += 1;
            bytes += data.len() as u64;
        }
        self.count_run(t, count, bytes);
    }

    /// `t`'s connection, unless it is gone or closing.
    #[inline(always)]
    pub(super) fn open_target(&mut self, t: &Target) -> Option<&mut crate::core::client::Client> {
        self.clients
            .get_mut(t.conn.idx as usize)
            .filter(|c| c.gen == t.conn.gen && c.closing.is_none())
    }

    /// `t` was given `count` messages of `bytes` payload: its connection's and the shard's
    /// counters, its subscription's deliveries, a wake-up.
    fn count_run(&mut self, t: &Target, count: u64, bytes: u64) {
        if let Some(c) = self
            .clients
            .get_mut(t.conn.idx as usize)
            .filter(|c| c.gen == t.conn.gen)
        {
            c.out_msgs += count;
            c.out_bytes += bytes;
            if !c.woken {
                c.woken = true;
                self.wakeups.push(t.conn);
            }
        }
        if let Some(sub) = self.subs.get_mut(t.id as usize) {
            sub.delivered += count;
        }
        self.counters.out_msgs += count;
        self.counters.out_bytes += bytes;
    }
}
