//! One `MSG` frame per message for many local subscribers.
//!
//! A delivery writes `MSG <subject> <sid> [<reply> ]<size>\r\n<payload>\r\n`, and only the
//! sid differs from one subscriber to the next. When a message goes to two or more local
//! subscriptions, the parts around the sid are put together once ([`FanFrame`]: the head
//! `MSG <subject> ` and the tail ` [<reply> ]<size>\r\n<payload>\r\n`), so each delivery
//! appends three pieces instead of eight. A fan-out profile had the delivery's appends and
//! `write_head` at a fifth of the server's time.
//!
//! Only plain messages are framed this way: no headers (HMSG, or headers stripped for a
//! client that does not take them), not the server's own (their two-space form), payloads
//! up to [`FAN_MAX_DATA`] (the frame holds a copy of the payload, one more copy per
//! message). The frame belongs to the delivery loop that built it and is handed to each
//! delivery explicitly, so a message published while delivering (an internal service's
//! reply, a slow consumer's disconnect event) never sees another message's frame.

use super::route::Msg;
use super::{ConnKey, ShardCore, SubId};
use std::time::Instant;

/// Largest payload framed once (larger ones are appended per delivery as they are).
pub(super) const FAN_MAX_DATA: usize = 4096;

/// The parts of a message's `MSG` frame around the sid.
#[derive(Debug, Default)]
pub(super) struct FanFrame {
    /// The head `MSG <subject> ` and the tail ` [<reply> ]<size>\r\n<payload>\r\n`.
    buf: Vec<u8>,
    /// Where the head ends and the tail starts in `buf`.
    head: usize,
    /// The whole frame with the last delivery's sid in it (empty: not made yet); that
    /// sid's length is what it has beyond `buf`. Subscribers' sids mostly have the same
    /// length, so a delivery is one append of this and an overwrite of the sid's few
    /// bytes, not three appends.
    whole: Vec<u8>,
}

impl FanFrame {
    /// Whether `m` is framed once for many subscribers.
    fn fits(m: &Msg<'_>) -> bool {
        m.header_len.is_none() && !m.internal && m.data.len() <= FAN_MAX_DATA
    }

    fn build(&mut self, m: &Msg<'_>) {
        let b = &mut self.buf;
        b.clear();
        b.extend_from_slice(b"MSG ");
        b.extend_from_slice(m.shown_subject());
        b.push(b' ');
        self.head = b.len();
        b.push(b' ');
        if !m.reply.is_empty() {
            b.extend_from_slice(m.reply);
            b.push(b' ');
        }
        b.extend_from_slice(m.size_text);
        super::route::finish_frame(b, m.data);
        self.whole.clear();
    }

    /// Appends the frame for a subscription with `sid` (not empty) to `w`.
    #[inline]
    pub(super) fn write(&mut self, w: &mut Vec<u8>, sid: &[u8]) {
        if self.whole.len() != self.buf.len() + sid.len() {
            let (head, tail) = self.buf.split_at(self.head.min(self.buf.len()));
            self.whole.clear();
            self.whole.extend_from_slice(head);
            self.whole.extend_from_slice(sid);
            self.whole.extend_from_slice(tail);
            w.extend_from_slice(&self.whole);
            return;
        }
        let at = w.len() + self.head;
        w.extend_from_slice(&self.whole);
        if let Some(dst) = w.get_mut(at..at + sid.len()) {
            overwrite(dst, sid);
        }
    }
}

/// `dst.copy_from_slice(src)` (same lengths) with the usual short sids copied by moves of a
/// known size rather than a `memcpy` call.
#[inline(always)]
pub(super) fn overwrite(dst: &mut [u8], src: &[u8]) {
    match (dst, src) {
        ([d], [s]) => *d = *s,
        ([d0, d1], [s0, s1]) => (*d0, *d1) = (*s0, *s1),
        ([d0, d1, d2], [s0, s1, s2]) => (*d0, *d1, *d2) = (*s0, *s1, *s2),
        (d, s) if d.len() == 4 && s.len() == 4 => d[..4].copy_from_slice(&s[..4]),
        (d, s) if d.len() == s.len() => d.copy_from_slice(s),
        _ => {}
    }
}

impl ShardCore {
    /// Deliver `m` to each of `psubs` (plain subscriptions of this shard); whether any
    /// took it.
    pub(super) fn deliver_each(
        &mut self,
        psubs: &[SubId],
        publisher: Option<ConnKey>,
        m: &Msg<'_>,
        now: Instant,
    ) -> bool {
        let mut delivered = false;
        if psubs.len() < 2 || !FanFrame::fits(m) {
            for &sid in psubs {
                delivered |= self.deliver(sid, publisher, m, now);
            }
            return delivered;
        }
        // Taken out for the loop: a delivery that publishes meanwhile builds its own.
        let mut fan = std::mem::take(&mut self.fan);
        fan.build(m);
        for &sid in psubs {
            delivered |= self.deliver_framed(sid, publisher, m, now, Some(&mut fan));
        }
        self.fan = fan;
        delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<'a>(subject: &'a [u8], reply: &'a [u8], data: &'a [u8], size_text: &'a [u8]) -> Msg<'a> {
        Msg {
            subject,
            reply,
            header_len: None,
            data,
            size_text,
            hdr_text: b"",
            internal: false,
            shown: b"",
        }
    }

    #[test]
    fn head_and_tail_surround_the_sid() {
        let mut f = FanFrame::default();
        f.build(&msg(b"foo.bar", b"", b"hello", b"5"));
        let mut frame = Vec::new();
        f.write(&mut frame, b"7");
        assert_eq!(frame, b"MSG foo.bar 7 5\r\nhello\r\n");
        f.build(&msg(b"q", b"_INBOX.x", b"", b"00"));
        let mut frame = Vec::new();
        f.write(&mut frame, b"12");
        assert_eq!(
            frame, b"MSG q 12 _INBOX.x 00\r\n\r\n",
            "reply, and the size text as published"
        );
    }

    #[test]
    fn only_plain_small_messages_are_framed_once() {
        let big = vec![0u8; FAN_MAX_DATA + 1];
        assert!(FanFrame::fits(&msg(b"a", b"", &big[1..], b"4096")));
        assert!(!FanFrame::fits(&msg(b"a", b"", &big, b"4097")));
        let mut m = msg(b"a", b"", b"x", b"1");
        m.header_len = Some(0);
        assert!(!FanFrame::fits(&m), "headers");
        let mut m = msg(b"a", b"", b"x", b"1");
        m.internal = true;
        assert!(!FanFrame::fits(&m), "the server's own");
    }

    #[test]
    fn whole_frames_carry_each_sid() {
        let mut f = FanFrame::default();
        f.build(&msg(b"foo.bar", b"r", b"hello", b"5"));
        let mut out = b"prev".to_vec();
        let sids: [&[u8]; 9] = [
            b"1",
            b"2",
            b"22",
            b"33",
            b"444",
            b"5555",
            b"66666",
            b"6",
            b"123456789012",
        ];
        let mut want = b"prev".to_vec();
        for sid in sids {
            f.write(&mut out, sid);
            want.extend_from_slice(b"MSG foo.bar ");
            want.extend_from_slice(sid);
            want.extend_from_slice(b" r 5\r\nhello\r\n");
        }
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&want));
        // A new message starts over, even with a sid of the same length.
        f.build(&msg(b"x", b"", b"", b"0"));
        let mut out = Vec::new();
        f.write(&mut out, b"7");
        f.write(&mut out, b"8");
        assert_eq!(out, b"MSG x 7 0\r\n\r\nMSG x 8 0\r\n\r\n");
    }
}
