//! Republish (`republish {src, dest, headers_only}`): once a message is stored, it is
//! published again in the stream's account on the transformed subject, with the stored
//! headers followed by `Nats-Stream`, `Nats-Subject`, `Nats-Sequence`, `Nats-Time-Stamp`
//! (RFC 3339 with nanoseconds, UTC) and `Nats-Last-Sequence` (the subject's previous
//! message, 0 for none), and for `headers_only` `Nats-Msg-Size` instead of the payload
//! — the reference's lines, in its order.
//!
//! The stream only queues what to publish ([`Stream::outbox`]); the shard publishes it
//! once it no longer holds the stream (a republish may land in another stream of the
//! same shard).

use super::Stream;
use crate::core::accounts::AccountId;
use crate::core::shard::ShardCore;
use crate::jetstream::api::GoTime;
use std::time::Instant;

/// A message to publish for a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub subject: String,
    pub header: Vec<u8>,
    pub payload: Vec<u8>,
}

/// The republish headers: `stored` (the stored block, possibly empty) without its closing
/// blank line, then the republish lines.
#[allow(clippy::too_many_arguments)]
pub fn header(
    stored: &[u8],
    stream: &str,
    subject: &str,
    seq: u64,
    ts: i64,
    last_seq: u64,
    msg_size: Option<usize>,
) -> Vec<u8> {
    let mut h = Vec::with_capacity(160 + stored.len());
    match stored.len().checked_sub(2).and_then(|end| stored.get(..end)) {
        Some(block) if !block.is_empty() => h.extend_from_slice(block),
        _ => h.extend_from_slice(b"NATS/1.0\r\n"),
    }
    let ts = GoTime(ts).format();
    let lines = format!(
        "Nats-Stream: {stream}\r\nNats-Subject: {subject}\r\nNats-Sequence: {seq}\r\nNats-Time-Stamp: {ts}\r\nNats-Last-Sequence: {last_seq}\r\n"
    );
    h.extend_from_slice(lines.as_bytes());
    if let Some(n) = msg_size {
        h.extend_from_slice(format!("Nats-Msg-Size: {n}\r\n").as_bytes());
    }
    h.extend_from_slice(b"\r\n");
    h
}

impl Stream {
    /// Before storing on `subject`: where it will be republished and the subject's last
    /// sequence so far (`None`: the stream does not republish this subject).
    pub fn republish_plan(&mut self, subject: &str) -> Option<(String, u64)> {
        if !self.flows.republishes() {
            return None;
        }
        let to = self.flows.republish_to(subject)?;
        let last = self.store.load_last_msg(subject).map_or(0, |m| m.seq);
        Some((to, last))
    }

    /// After storing `seq` (at `ts`): queue its republish on `plan`'s subject.
    #[allow(clippy::too_many_arguments)]
    pub fn queue_republish(
        &mut self,
        plan: (String, u64),
        subject: &str,
        hdr: &[u8],
        payload: &[u8],
        seq: u64,
        ts: i64,
    ) {
        let (to, last) = plan;
        let headers_only = self.flows.headers_only();
        let header = header(
            hdr,
            &self.name,
            subject,
            seq,
            ts,
            last,
            headers_only.then_some(payload.len()),
        );
        let payload = if headers_only { Vec::new() } else { payload.to_vec() };
        self.outbox.push(Outgoing {
            subject: to,
            header,
            payload,
        });
    }
}

/// Publish a stream's queued messages in its account (the stream is not borrowed).
pub fn send(core: &mut ShardCore, acc: AccountId, out: Vec<Outgoing>, now: Instant) {
    for m in out {
        core.publish_jetstream(acc, m.subject.as_bytes(), b"", Some(&m.header), &m.payload, now);
    }
}

/// Publish queued messages from where the shard's JetStream part is borrowed (its
/// timers): on a job of this shard, so that a republish into another stream of this
/// shard is taken.
pub fn send_later(core: &mut ShardCore, acc: AccountId, out: Vec<Outgoing>) {
    if out.is_empty() {
        return;
    }
    let shard = core.index();
    let Some(post) = core.post().cloned() else {
        return;
    };
    post.post(
        shard,
        Box::new(move |core: &mut ShardCore, now: Instant| send(core, acc, out, now)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2024-01-02T03:04:05.5Z
    const TS: i64 = 1_704_164_645_500_000_000;

    #[test]
    fn header_lines() {
        let cases: [(&[u8], Option<usize>, &str); 4] = [
            (
                b"",
                None,
                "NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: a.b\r\nNats-Sequence: 7\r\nNats-Time-Stamp: 2024-01-02T03:04:05.5Z\r\nNats-Last-Sequence: 3\r\n\r\n",
            ),
            (
                b"",
                Some(12),
                "NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: a.b\r\nNats-Sequence: 7\r\nNats-Time-Stamp: 2024-01-02T03:04:05.5Z\r\nNats-Last-Sequence: 3\r\nNats-Msg-Size: 12\r\n\r\n",
            ),
            (
                b"NATS/1.0\r\nK: v\r\n\r\n",
                None,
                "NATS/1.0\r\nK: v\r\nNats-Stream: S\r\nNats-Subject: a.b\r\nNats-Sequence: 7\r\nNats-Time-Stamp: 2024-01-02T03:04:05.5Z\r\nNats-Last-Sequence: 3\r\n\r\n",
            ),
            (
                b"NATS/1.0\r\n\r\n",
                Some(0),
                "NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: a.b\r\nNats-Sequence: 7\r\nNats-Time-Stamp: 2024-01-02T03:04:05.5Z\r\nNats-Last-Sequence: 3\r\nNats-Msg-Size: 0\r\n\r\n",
            ),
        ];
        for (stored, size, want) in cases {
            let got = header(stored, "S", "a.b", 7, TS, 3, size);
            assert_eq!(String::from_utf8(got).unwrap(), want);
        }
    }
}
