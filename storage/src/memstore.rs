//! The memory store: the engine with message bodies held in memory. Nothing survives the
//! process; every write is "durable" at once. It is also the model the file store is
//! checked against (same engine, so the same semantics).

use crate::clock::{system_clock, SharedClock};
use crate::engine::{Drop as NoSink, Engine, Entry, Sink, Why};
use crate::error::{Result, StoreError};
use crate::store::{SnapshotMeta, Store};
use crate::subject::Filter;
use crate::types::{memory_msg_size, StorageKind, StoreConfig, StoredMsg};
use bytes::Bytes;
use std::io::Write;

/// A message body: headers then payload in one buffer.
#[derive(Clone, Debug)]
pub struct MemBody {
    buf: Bytes,
    hdr_len: u32,
}

/// The in-memory store. Owned by the stream's shard.
pub struct MemStore {
    eng: Engine<MemBody>,
    clock: SharedClock,
    closed: bool,
}

impl MemStore {
    pub fn new(cfg: StoreConfig) -> MemStore {
        MemStore::with_clock(cfg, system_clock())
    }

    pub fn with_clock(cfg: StoreConfig, clock: SharedClock) -> MemStore {
        MemStore {
            eng: Engine::new(cfg, memory_msg_size),
            clock,
            closed: false,
        }
    }

    fn open(&self) -> Result<()> {
        if self.closed {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }

    fn to_msg(&self, seq: u64, e: &Entry<MemBody>) -> StoredMsg {
        let h = (e.loc.hdr_len as usize).min(e.loc.buf.len());
        StoredMsg {
            seq,
            ts: e.ts,
            subject: self.eng.subject_of(e).to_string(),
            headers: e.loc.buf.slice(..h),
            payload: e.loc.buf.slice(h..),
        }
    }

    fn load(&self, seq: u64) -> Result<StoredMsg> {
        match self.eng.index.get(seq) {
            Some(e) => Ok(self.to_msg(seq, e)),
            None if seq > self.eng.last_seq => Err(StoreError::Eof),
            None => Err(StoreError::MsgNotFound),
        }
    }

    /// Approximate bytes held (index, subjects and bodies).
    pub fn heap_bytes(&self) -> usize {
        self.eng.heap_bytes() + self.eng.index.iter().map(|(_, e)| e.loc.buf.len()).sum::<usize>()
    }

    /// Every live message in order (snapshots, tests).
    pub fn messages(&self) -> impl Iterator<Item = StoredMsg> + '_ {
        self.eng.index.iter().map(|(s, e)| self.to_msg(s, e))
    }

    fn store_at(&mut self, subject: &str, hdr: &[u8], msg: &[u8], seq: u64, ts: i64, ttl: i64) {
        let mut buf = Vec::with_capacity(hdr.len() + msg.len());
        buf.extend_from_slice(hdr);
        buf.extend_from_slice(msg);
        let body = MemBody {
            buf: Bytes::from(buf),
            hdr_len: hdr.len() as u32,
        };
        let size = self.eng.msg_size(subject, hdr, msg);
        self.eng.insert(seq, ts, subject, size, ttl, body, &mut NoSink);
    }
}

struct Quiet;
impl Sink<MemBody> for Quiet {
    fn removed(&mut self, _: u64, _: Entry<MemBody>, _: Why) {}
}

impl Store for MemStore {
    fn kind(&self) -> StorageKind {
        StorageKind::Memory
    }

    fn msg_size(&self, subject: &str, headers: &[u8], payload: &[u8]) -> u64 {
        self.eng.msg_size(subject, headers, payload)
    }

    fn store_msg(&mut self, subject: &str, headers: &[u8], payload: &[u8], ttl: i64) -> Result<(u64, i64)> {
        let ts = self.clock.now_nanos();
        self.store_msg_at(subject, headers, payload, ts, ttl)
    }

    fn store_msg_at(&mut self, subject: &str, headers: &[u8], payload: &[u8], ts: i64, ttl: i64) -> Result<(u64, i64)> {
        self.open()?;
        self.eng.check_store(subject, headers, payload, true)?;
        let seq = self.eng.next_seq(0)?;
        self.store_at(subject, headers, payload, seq, ts, ttl);
        Ok((seq, ts))
    }

    fn store_raw_msg(
        &mut self,
        subject: &str,
        headers: &[u8],
        payload: &[u8],
        seq: u64,
        ts: i64,
        ttl: i64,
        discard_new_check: bool,
    ) -> Result<()> {
        self.open()?;
        self.eng.check_store(subject, headers, payload, discard_new_check)?;
        let seq = self.eng.next_seq(seq)?;
        self.store_at(subject, headers, payload, seq, ts, ttl);
        Ok(())
    }

    fn skip_msg(&mut self, seq: u64) -> Result<u64> {
        self.open()?;
        let now = self.clock.now_nanos();
        self.eng.skip(seq, 1, now)
    }

    fn skip_msgs(&mut self, seq: u64, num: u64) -> Result<()> {
        self.open()?;
        let now = self.clock.now_nanos();
        self.eng.skip(seq, num, now).map(|_| ())
    }

    fn load_msg(&mut self, seq: u64) -> Result<StoredMsg> {
        self.open()?;
        self.load(seq)
    }

    fn load_next_msg(&mut self, filter: &Filter, start: u64) -> Result<StoredMsg> {
        self.open()?;
        match self.eng.next_matching(filter, start) {
            Some(s) => self.load(s),
            None => Err(StoreError::Eof),
        }
    }

    fn load_prev_msg(&mut self, filter: &Filter, start: u64) -> Result<StoredMsg> {
        self.open()?;
        match self.eng.prev_matching(filter, start) {
            Some(s) => self.load(s),
            None => Err(StoreError::MsgNotFound),
        }
    }

    fn load_last_msg(&mut self, subject: &str) -> Result<StoredMsg> {
        self.open()?;
        match self.eng.last_matching(subject) {
            Some(s) => self.load(s),
            None => Err(StoreError::MsgNotFound),
        }
    }

    fn subject_for_seq(&mut self, seq: u64) -> Result<String> {
        self.open()?;
        self.eng
            .index
            .get(seq)
            .map(|e| self.eng.subject_of(e).to_string())
            .ok_or(StoreError::MsgNotFound)
    }

    fn remove_msg(&mut self, seq: u64) -> Result<bool> {
        self.open()?;
        Ok(self.eng.remove(seq, Why::User, &mut Quiet))
    }

    fn erase_msg(&mut self, seq: u64) -> Result<bool> {
        self.open()?;
        Ok(self.eng.remove(seq, Why::Erase, &mut Quiet))
    }

    fn purge(&mut self) -> Result<u64> {
        self.open()?;
        Ok(self.eng.purge_all(&mut Quiet))
    }

    fn purge_ex(&mut self, subject: &str, seq: u64, keep: u64) -> Result<u64> {
        self.open()?;
        Ok(self.eng.purge_ex(subject, seq, keep, &mut Quiet))
    }

    fn compact(&mut self, seq: u64) -> Result<u64> {
        self.open()?;
        Ok(self.eng.compact(seq, &mut Quiet))
    }

    fn truncate(&mut self, seq: u64) -> Result<()> {
        self.open()?;
        let now = self.clock.now_nanos();
        self.eng.truncate(seq, now, &mut Quiet)
    }

    crate::engine::engine_queries!();

    fn update_config(&mut self, cfg: StoreConfig) -> Result<()> {
        self.open()?;
        self.eng.update_config(cfg, &mut Quiet);
        Ok(())
    }

    fn config(&self) -> &StoreConfig {
        &self.eng.cfg
    }

    fn next_expiry(&self) -> Option<i64> {
        self.eng.next_expiry()
    }

    fn expire(&mut self) -> Result<u64> {
        self.open()?;
        let now = self.clock.now_nanos();
        Ok(self.eng.expire(now, &mut Quiet))
    }

    fn take_due(&mut self) -> Result<Vec<u64>> {
        self.open()?;
        let now = self.clock.now_nanos();
        Ok(self.eng.due(now))
    }

    fn durable_seq(&self) -> u64 {
        self.eng.last_seq
    }

    fn poll_completions(&mut self) -> Result<u64> {
        Ok(self.eng.last_seq)
    }

    fn submit(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn snapshot(&mut self, meta: &SnapshotMeta, out: &mut dyn Write) -> Result<()> {
        self.open()?;
        let st = self.eng.fast_state();
        let name = self.eng.cfg.name.clone();
        crate::reference::snapshot::write(&name, meta, &st, self.messages(), out)
    }

    fn corruptions(&self) -> u64 {
        0
    }

    fn stop(&mut self) -> Result<()> {
        self.closed = true;
        Ok(())
    }
}
