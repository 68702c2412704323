//! Large messages between shards in one copy (issue 14's single-copy cross-shard path).
//!
//! A message of at least [`BLOB_MIN`] bytes for plain subscribers on another shard is
//! copied once, from the publisher's read buffer into a buffer of its own (a *blob*, see
//! `mesh_codec`), with room in front for a `MSG` line. The receiving shard writes the line
//! of its last subscriber into that room and queues the blob itself on the connection
//! ([`crate::core::outbuf::OutBuf::push_owned`]); the driver sends from it. Before, the
//! payload was copied into the mesh batch and again into the connection's output.
//! Subscribers before the last, and any delivery that is not a plain one (internal
//! clients, stripped headers, permissions, traces, auto-unsubscribe, a slow consumer),
//! copy from the blob as before.
//!
//! The blob is owned by exactly one place at a time: the staging batch, the ring, the
//! receiving shard while it delivers, then the connection's output until written. Then
//! it goes back to the shard that filled it (tagged with that shard's index in its room,
//! `outbuf::tag_blob`; carried by the next mesh batch that shard gets back), which fills
//! it again: a buffer allocated by one shard's thread and freed by another's made the
//! allocator's arenas the bottleneck (pub/sub at 64 KiB: 0.87x the copying path before
//! the return, see perf/RESULTS.md, stop 34).

use super::route::{routed_matches, write_head, Msg};
use super::ShardCore;
use crate::core::client::SubId;
use crate::core::mesh_codec::{self, flags, MsgRecord};
use crate::core::outbuf::{recycle_chunk, tag_blob, BLOB_TAG_LEN};
use std::time::Instant;

/// Smallest payload (headers included) sent as a blob: a frame this large gets an output
/// chunk of its own on the copying path as well, so the blob costs no extra sends.
/// Measured against the copying path (perf/RESULTS.md, stop 34), pub/sub on two shards:
/// 64 KiB 1.04x msgs/s at 0.79x CPU; at 32 KiB, where two copied frames share a chunk and
/// each blob is a send of its own, 0.90x; at 16 KiB even.
pub const BLOB_MIN: usize = crate::core::outbuf::CHUNK;
/// Most bytes of returned blobs a shard keeps for reuse.
const POOL_MAX_BYTES: usize = 2 * 1024 * 1024;
/// Room kept for the subscription id in front of a blob's payload: a longer one makes
/// that delivery copy.
const SID_ROOM: usize = 24;

impl ShardCore {
    /// Stage `m` for shard `dst` as a blob, if it is one: large (the caller checked
    /// [`BLOB_MIN`] inline), for plain subscribers (no queue groups), not traced. False if
    /// the caller should stage a plain record.
    pub(super) fn stage_blob(&mut self, dst: usize, f: u8, acc: u32, m: &Msg<'_>, queues: usize) -> bool {
        debug_assert!(m.data.len() >= BLOB_MIN, "the caller checks the size");
        if queues > 0 || self.tracing.is_some() {
            return false;
        }
        let room = BLOB_TAG_LEN
            + 16
            + m.shown_subject().len()
            + m.reply.len()
            + m.size_text.len()
            + m.hdr_text.len()
            + SID_ROOM;
        let raw = m.raw_sizes();
        let buf = self.pooled_blob(room + m.data.len() + 2);
        mesh_codec::put_msg_blob(self.stage_batch(dst), f, acc, &m.parts(), raw, room, buf);
        true
    }

    /// A returned blob buffer of at least `need` bytes (and not much more), or a new one.
    fn pooled_blob(&mut self, need: usize) -> Vec<u8> {
        let fits = |b: &Vec<u8>| b.capacity() >= need && b.capacity() <= need.saturating_mul(2);
        match self.blob_pool.iter().position(fits) {
            Some(i) => {
                let b = self.blob_pool.swap_remove(i);
                self.blob_pool_bytes -= b.capacity();
                b
            }
            None => Vec::new(),
        }
    }

    /// Blob buffers that came back with a recycled batch: keep them for reuse, within
    /// [`POOL_MAX_BYTES`] (the oldest go first).
    pub(super) fn keep_blobs(&mut self, back: &mut Vec<Vec<u8>>) {
        for b in back.drain(..) {
            self.blob_pool_bytes += b.capacity();
            self.blob_pool.push(b);
        }
        while self.blob_pool_bytes > POOL_MAX_BYTES && !self.blob_pool.is_empty() {
            let b = self.blob_pool.remove(0);
            self.blob_pool_bytes -= b.capacity();
        }
    }

    /// Blob buffers kept for reuse (tests).
    #[cfg(test)]
    pub(super) fn blob_pool_len(&self) -> usize {
        self.blob_pool.len()
    }

    /// A blob record from shard `src`: deliver it, the last local subscriber taking the
    /// blob itself.
    pub(super) fn deliver_remote_blob(&mut self, src: usize, rec: &MsgRecord<'_>, blob: Vec<u8>, now: Instant) {
        let head = rec.blob_head.map_or(usize::MAX, |h| h as usize);
        let plain = rec.flags & (flags::RESPONSE | flags::QUEUE_ONLY | flags::TRACE) == 0
            && rec.trace.is_none()
            && rec.queues().next().is_none();
        let Some(data) = blob.get(head..) else { return };
        if !plain {
            // Not what a publisher stages as a blob: the usual path, from the blob.
            self.deliver_remote(src, &rec.with_data(data), now);
            give_back(blob, src);
            return;
        }
        let (mut b1, mut b2) = (itoa::Buffer::new(), itoa::Buffer::new());
        // The record's own data is empty; the blob's is added per delivery below.
        let meta = Msg::from_record(rec, data.len(), &mut b1, &mut b2);
        let once = super::imports::is_one_shot(meta.subject);
        let local = routed_matches(&mut self.acct(rec.account).sublist, meta.subject, once);
        let Some((&last, rest)) = local.psubs.split_last() else {
            give_back(blob, src);
            return;
        };
        self.delivering_remote = true;
        for &sid in rest {
            let m = Msg {
                data: blob.get(head..).unwrap_or_default(),
                ..meta
            };
            self.deliver(sid, None, &m, now);
        }
        if let Err(blob) = self.deliver_blob(last, src, &meta, blob, head, now) {
            let m = Msg {
                data: blob.get(head..).unwrap_or_default(),
                ..meta
            };
            self.deliver(last, None, &m, now);
            give_back(blob, src);
        }
        self.delivering_remote = false;
    }

    /// Deliver `blob[head..]` to subscription `id` by queueing the blob itself, its `MSG`
    /// line written into the room in front. The blob comes back when this delivery is not
    /// a plain one; the caller then delivers it the usual way.
    fn deliver_blob(
        &mut self,
        id: SubId,
        src: usize,
        m: &Msg<'_>,
        mut blob: Vec<u8>,
        head: usize,
        now: Instant,
    ) -> Result<(), Vec<u8>> {
        if self.tracing.is_some() || self.cfg.trace {
            return Err(blob);
        }
        let max_pending = self.cfg.max_pending;
        let Some(sub) = self.subs.get_mut(id as usize) else {
            return Err(blob);
        };
        let conn = sub.conn;
        let Some(c) = self.clients.get_mut(conn.idx as usize).filter(|c| c.gen == conn.gen) else {
            return Err(blob);
        };
        let stripped = m.header_len.is_some() && !c.headers;
        if c.internal || c.closing.is_some() || c.perms.is_some() || sub.max > 0 || stripped {
            return Err(blob);
        }
        let data_len = blob.len().saturating_sub(head);
        // The slow-consumer test of the copying path, with its estimate of the frame.
        let need = 32 + m.subject.len() + sub.sid.len() + m.reply.len() + data_len;
        if c.out.len() + need > max_pending {
            // A slow consumer: the usual path closes it.
            return Err(blob);
        }
        // The line is built in the shard's scratch buffer (no allocation per message).
        let mut line = std::mem::take(&mut self.line_buf);
        line.clear();
        match m.header_len {
            Some(_) => {
                line.extend_from_slice(b"HMSG ");
                write_head(&mut line, m.shown_subject(), &sub.sid, m.reply, m.internal);
                line.extend_from_slice(m.hdr_text);
                line.push(b' ');
            }
            None => {
                line.extend_from_slice(b"MSG ");
                write_head(&mut line, m.shown_subject(), &sub.sid, m.reply, m.internal);
            }
        }
        line.extend_from_slice(m.size_text);
        line.extend_from_slice(b"\r\n");
        // The line must leave the tag's bytes at the blob's front free.
        let start = head.checked_sub(line.len()).filter(|&s| s >= BLOB_TAG_LEN);
        let placed = start
            .and_then(|s| blob.get_mut(s..head))
            .map(|room| room.copy_from_slice(&line));
        self.line_buf = line;
        let (Some(start), Some(())) = (start, placed) else {
            // No room for this subscription's line.
            return Err(blob);
        };
        tag_blob(&mut blob, src as u16);
        blob.extend_from_slice(b"\r\n");
        c.out.push_owned(blob, start, now);
        sub.delivered += 1;
        c.out_msgs += 1;
        c.out_bytes += data_len as u64;
        self.counters.out_msgs += 1;
        self.counters.out_bytes += data_len as u64;
        if !c.woken {
            c.woken = true;
            self.wakeups.push(conn);
        }
        Ok(())
    }
}

/// A blob this shard is done with (delivered by copies): back to shard `owner`.
fn give_back(mut blob: Vec<u8>, owner: usize) {
    tag_blob(&mut blob, owner as u16);
    recycle_chunk(blob);
}
