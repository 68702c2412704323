//! Direct get (`allow_direct`): `$JS.API.DIRECT.GET.<S>` with a request and
//! `$JS.API.DIRECT.GET.<S>.<subject>` for the last message on a subject, answered with the
//! stored message itself (its headers plus `Nats-Stream`, `Nats-Subject`,
//! `Nats-Sequence`, `Nats-Time-Stamp`), batches ending in `204 EOB`, and status messages
//! for what is refused or missing. Subscribed in queue group `_sys_` on the stream's
//! shard.

use super::Stream;
use crate::jetstream::api::requests::{direct_get_last_by_subject, direct_get_request, MsgGetRequest};
use crate::jetstream::api::GoTime;
use storage::{Filter, StoredMsg};

/// One reply: the header block and payload.
pub struct Reply {
    pub header: Vec<u8>,
    pub payload: bytes::Bytes,
}

/// Most messages one batch returns.
const MAX_BATCH: usize = 1000;

fn status(line: &str) -> Reply {
    Reply {
        header: format!("NATS/1.0 {line}\r\n\r\n").into_bytes(),
        payload: bytes::Bytes::new(),
    }
}

/// The stored message with the direct-get headers (and the batch ones when given).
fn message(stream: &str, m: &StoredMsg, no_hdr: bool, batch: Option<(u64, u64)>) -> Reply {
    // The names, a sequence, a time and the batch fields fit in 192 bytes.
    let mut h = Vec::with_capacity(192 + m.headers.len() + stream.len() + m.subject.len());
    if !no_hdr && m.headers.len() > 12 && m.headers.starts_with(b"NATS/1.0") {
        // The original block without its closing blank line.
        h.extend_from_slice(m.headers.get(..m.headers.len() - 2).unwrap_or(&m.headers));
    } else {
        h.extend_from_slice(b"NATS/1.0\r\n");
    }
    for (name, value) in [
        (&b"Nats-Stream: "[..], stream.as_bytes()),
        (b"\r\nNats-Subject: ", m.subject.as_bytes()),
        (b"\r\nNats-Sequence: ", itoa::Buffer::new().format(m.seq).as_bytes()),
    ] {
        h.extend_from_slice(name);
        h.extend_from_slice(value);
    }
    h.extend_from_slice(b"\r\nNats-Time-Stamp: ");
    GoTime(m.ts).format_into(&mut h);
    h.extend_from_slice(b"\r\n");
    if let Some((pending, last)) = batch {
        h.extend_from_slice(format!("Nats-Num-Pending: {pending}\r\nNats-Last-Sequence: {last}\r\n").as_bytes());
    }
    h.extend_from_slice(b"\r\n");
    Reply {
        header: h,
        payload: m.payload.clone(),
    }
}

impl Stream {
    /// Answer a direct get on `subject` with `body`.
    pub fn direct_get(&mut self, subject: &str, body: &[u8]) -> Vec<Reply> {
        let base = "$JS.API.DIRECT.GET.".len() + self.name.len();
        let req = if subject.len() > base {
            direct_get_last_by_subject(subject, body)
        } else {
            direct_get_request(body)
        };
        let req = match req {
            Ok(r) => r,
            Err(refusal) => return vec![status(refusal.status())],
        };
        if !req.multi_last.is_empty() {
            return self.multi_last(&req);
        }
        if req.batch > 0 {
            return self.batch(&req);
        }
        match self.load_one(&req) {
            Some(m) => vec![message(&self.name, &m, req.no_hdr, None)],
            None => vec![status("404 Message Not Found")],
        }
    }

    fn load_one(&mut self, req: &MsgGetRequest) -> Option<StoredMsg> {
        if !req.last_by_subj.is_empty() {
            return self.store.load_last_msg(&req.last_by_subj).ok();
        }
        let mut start = req.seq;
        if let Some(t) = req.start_time {
            start = self.store.seq_from_time(t.nanos());
        }
        if !req.next_by_subj.is_empty() {
            return self
                .store
                .load_next_msg(&Filter::new(&req.next_by_subj), start.max(1))
                .ok();
        }
        if req.start_time.is_some() {
            return self.store.load_next_msg(&Filter::all(), start.max(1)).ok();
        }
        self.store.load_msg(start).ok()
    }

    fn batch(&mut self, req: &MsgGetRequest) -> Vec<Reply> {
        let filter = if req.next_by_subj.is_empty() {
            Filter::all()
        } else {
            Filter::new(&req.next_by_subj)
        };
        let mut seq = req.seq.max(1);
        if let Some(t) = req.start_time {
            seq = self.store.seq_from_time(t.nanos()).max(1);
        }
        let want = usize::try_from(req.batch).unwrap_or(0).min(MAX_BATCH);
        let max_bytes = if req.max_bytes > 0 {
            req.max_bytes as u64
        } else {
            u64::MAX
        };
        let up_to = if req.up_to_seq > 0 { req.up_to_seq } else { u64::MAX };
        let mut found: Vec<StoredMsg> = Vec::new();
        let mut bytes = 0u64;
        while found.len() < want {
            let Ok(m) = self.store.load_next_msg(&filter, seq) else {
                break;
            };
            if m.seq > up_to {
                break;
            }
            if let Some(t) = req.up_to_time {
                if m.ts > t.nanos() {
                    break;
                }
            }
            let size = (m.subject.len() + m.headers.len() + m.payload.len()) as u64;
            if !found.is_empty() && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            seq = m.seq + 1;
            found.push(m);
        }
        if found.is_empty() {
            return vec![status("404 No Results")];
        }
        let mut out = Vec::with_capacity(found.len() + 1);
        let mut last = 0u64;
        for m in &found {
            let pending = self.store.num_pending(m.seq + 1, &filter, false);
            out.push(message(&self.name, m, req.no_hdr, Some((pending, last))));
            last = m.seq;
        }
        let pending = found
            .last()
            .map_or(0, |m| self.store.num_pending(m.seq + 1, &filter, false));
        out.push(Reply {
            header: format!("NATS/1.0 204 EOB\r\nNats-Num-Pending: {pending}\r\nNats-Last-Sequence: {last}\r\n\r\n")
                .into_bytes(),
            payload: bytes::Bytes::new(),
        });
        out
    }

    fn multi_last(&mut self, req: &MsgGetRequest) -> Vec<Reply> {
        let subjects: Vec<&str> = req.multi_last.iter().map(String::as_str).collect();
        let filter = Filter::many(subjects);
        let mut up_to = req.up_to_seq;
        if let Some(t) = req.up_to_time {
            up_to = self.store.seq_from_time(t.nanos()).saturating_sub(1);
        }
        let seqs = match self.store.multi_last_seqs(&filter, up_to, MAX_BATCH) {
            Ok(s) => s,
            Err(storage::StoreError::TooManyResults) => return vec![status("413 Too Many Results")],
            Err(_) => return vec![status("404 No Results")],
        };
        let want = if req.batch > 0 {
            usize::try_from(req.batch).unwrap_or(MAX_BATCH)
        } else {
            MAX_BATCH
        };
        let take: Vec<u64> = seqs.into_iter().take(want).collect();
        if take.is_empty() {
            return vec![status("404 No Results")];
        }
        let mut out = Vec::new();
        let mut last = 0;
        let total = take.len();
        for (i, seq) in take.iter().enumerate() {
            let Ok(m) = self.store.load_msg(*seq) else { continue };
            let pending = (total - i - 1) as u64;
            out.push(message(&self.name, &m, req.no_hdr, Some((pending, last))));
            last = m.seq;
        }
        let mut eob = format!("NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: {last}\r\n");
        if up_to > 0 {
            eob.push_str(&format!("Nats-UpTo-Sequence: {up_to}\r\n"));
        }
        eob.push_str("\r\n");
        out.push(Reply {
            header: eob.into_bytes(),
            payload: bytes::Bytes::new(),
        });
        out
    }
}
