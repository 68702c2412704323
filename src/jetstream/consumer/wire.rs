//! The consumer's byte formats: the ack reply subject it stamps on deliveries and parses
//! back, ack payloads, pull request bodies, and the status headers (`NATS/1.0 <code>
//! <text>`) it answers with. Texts are nats-server 2.14's, checked against the reference
//! binary where noted in the tests.

use serde::Deserialize;

/// `Nats-Pending-Messages`.
pub const PENDING_MSGS: &str = "Nats-Pending-Messages";
/// `Nats-Pending-Bytes`.
pub const PENDING_BYTES: &str = "Nats-Pending-Bytes";
/// `Nats-Pin-Id`.
pub const PIN_ID: &str = "Nats-Pin-Id";
/// `Nats-Msg-Size` (headers-only deliveries).
pub const MSG_SIZE: &str = "Nats-Msg-Size";
/// `Nats-Required-Api-Level`.
pub const REQUIRED_API_LEVEL: &str = "Nats-Required-Api-Level";
/// The JetStream API level of nats-server 2.14.
pub const API_LEVEL: i64 = 4;

/// What a delivery's ack subject carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckInfo {
    pub deliveries: u64,
    pub stream_seq: u64,
    pub consumer_seq: u64,
    pub ts: i64,
    pub pending: u64,
}

/// `$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>`.
pub fn ack_subject(stream: &str, consumer: &str, a: &AckInfo) -> String {
    // Five numbers of at most 20 digits, each after a dot: never a second allocation.
    let mut out = String::with_capacity("$JS.ACK.".len() + stream.len() + 1 + consumer.len() + 5 * 21);
    out.push_str("$JS.ACK.");
    out.push_str(stream);
    out.push('.');
    out.push_str(consumer);
    let mut num = itoa::Buffer::new();
    for n in [a.deliveries, a.stream_seq, a.consumer_seq] {
        out.push('.');
        out.push_str(num.format(n));
    }
    out.push('.');
    out.push_str(num.format(a.ts));
    out.push('.');
    out.push_str(num.format(a.pending));
    out
}

fn ack_num(tok: &[u8]) -> Option<u64> {
    if tok.is_empty() {
        return None;
    }
    // Digits only, read and checked in one pass; too big for a u64 is not a number.
    tok.iter().try_fold(0u64, |n, &b| {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// Parse an ack subject, v1 (9 tokens) or v2 (11 or more: domain and account hash after
/// `$JS.ACK`). `None` when it is not one. Works on bytes: it runs for every ack.
pub fn parse_ack_subject(subject: impl AsRef<[u8]>) -> Option<AckInfo> {
    // The tokens that matter are among the first 11; more only says "v2".
    let mut toks: [&[u8]; 11] = [b""; 11];
    let mut n = 0usize;
    for t in subject.as_ref().split(|&b| b == b'.') {
        if let Some(slot) = toks.get_mut(n) {
            *slot = t;
        }
        n += 1;
    }
    if (n != 9 && n < 11) || toks[0] != b"$JS" || toks[1] != b"ACK" {
        return None;
    }
    let off = if n >= 11 { 4 } else { 2 };
    let num = |i: usize| toks.get(off + i).and_then(|t| ack_num(t));
    Some(AckInfo {
        deliveries: num(2).unwrap_or(0),
        stream_seq: num(3).unwrap_or(0),
        consumer_seq: num(4).unwrap_or(0),
        ts: num(5).and_then(|n| i64::try_from(n).ok()).unwrap_or(-1),
        pending: num(6).unwrap_or(0),
    })
}

/// An ack payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckKind<'a> {
    /// Empty, `+ACK` or `+OK`.
    Ack,
    /// `-NAK`, with the delay (ns) when one parsed (`{"delay":ns}` or a Go duration).
    Nak(Option<i64>),
    /// `+WPI`.
    Progress,
    /// `+NXT` and the pull request that follows it.
    Next(&'a [u8]),
    /// `+TERM` and its reason.
    Term(String),
    /// Anything else (ignored, but a double ack is still answered).
    Unknown,
}

#[derive(Deserialize)]
struct NakOpts {
    #[serde(default)]
    delay: i64,
}

/// Classify an ack payload.
pub fn parse_ack(body: &[u8]) -> AckKind<'_> {
    match body {
        b"" | b"+ACK" | b"+OK" => return AckKind::Ack,
        b"+WPI" => return AckKind::Progress,
        _ => {}
    }
    if let Some(rest) = body.strip_prefix(b"+NXT") {
        return AckKind::Next(rest);
    }
    if let Some(rest) = body.strip_prefix(b"-NAK") {
        let arg = rest.trim_ascii();
        if arg.is_empty() {
            return AckKind::Nak(None);
        }
        let delay = if arg.first() == Some(&b'{') {
            serde_json::from_slice::<NakOpts>(arg).ok().map(|o| o.delay)
        } else {
            std::str::from_utf8(arg)
                .ok()
                .and_then(|s| conf::parse_duration_nanos(s).ok())
        };
        return AckKind::Nak(delay);
    }
    if let Some(rest) = body.strip_prefix(b"+TERM") {
        return AckKind::Term(String::from_utf8_lossy(rest.trim_ascii()).into_owned());
    }
    AckKind::Unknown
}

/// A pull request body's priority group fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct PriorityGroup {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub min_pending: i64,
    #[serde(default)]
    pub min_ack_pending: i64,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub priority: i64,
}

/// A parsed pull request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullParams {
    pub batch: i64,
    /// Nanoseconds; 0: until fulfilled.
    pub expires: i64,
    pub max_bytes: i64,
    pub no_wait: bool,
    /// Nanoseconds; 0: none.
    pub heartbeat: i64,
    /// Present for JSON requests.
    pub group: Option<PriorityGroup>,
}

/// Parse a pull request body: empty (batch 1), an integer (batch n), or JSON, with the
/// reference's decoding (`api::consumer_msgs::parse_pull`). The error is the text after
/// `Bad Request - `.
pub fn parse_pull(body: &[u8]) -> Result<PullParams, String> {
    let r = crate::jetstream::api::consumer_msgs::parse_pull(body)?;
    Ok(PullParams {
        batch: r.batch,
        expires: r.expires,
        max_bytes: r.max_bytes,
        no_wait: r.no_wait,
        heartbeat: r.idle_heartbeat,
        group: r.is_json.then_some(PriorityGroup {
            group: r.group,
            min_pending: r.min_pending,
            min_ack_pending: r.min_ack_pending,
            id: r.id,
            priority: r.priority,
        }),
    })
}

/// `NATS/1.0 <code> <text>\r\n\r\n`.
pub fn status(code: u16, text: &str) -> Vec<u8> {
    format!("NATS/1.0 {code} {text}\r\n\r\n").into_bytes()
}

/// A status with the pending counts of a pull request.
pub fn status_pending(code: u16, text: &str, msgs: i64, bytes: i64) -> Vec<u8> {
    format!("NATS/1.0 {code} {text}\r\n{PENDING_MSGS}: {msgs}\r\n{PENDING_BYTES}: {bytes}\r\n\r\n").into_bytes()
}

/// `100 Idle Heartbeat` with the last delivered sequences, and the flow control reply
/// the consumer is stalled on, if any.
pub fn heartbeat(last_consumer: u64, last_stream: u64, stalled: &str) -> Vec<u8> {
    let mut s = format!(
        "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: {last_consumer}\r\nNats-Last-Stream: {last_stream}\r\n"
    );
    if !stalled.is_empty() {
        s.push_str("Nats-Consumer-Stalled: ");
        s.push_str(stalled);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// `100 FlowControl Request`.
pub const FLOW_CONTROL: &[u8] = b"NATS/1.0 100 FlowControl Request\r\n\r\n";

/// Append `key: value` to a header block (or start one), as the reference's `genHeader`.
pub fn add_header(hdr: &[u8], key: &str, value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(hdr.len() + key.len() + value.len() + 16);
    if hdr.len() > 2 {
        out.extend_from_slice(hdr.get(..hdr.len() - 2).unwrap_or(hdr));
    } else {
        out.extend_from_slice(b"NATS/1.0\r\n");
    }
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

/// The value of header `key` (case-sensitive first, then case-insensitive) in a header
/// block.
pub fn header_value<'a>(hdr: &'a [u8], key: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(hdr).ok()?;
    let mut fallback = None;
    for line in text.split("\r\n").skip(1) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k == key {
            return Some(v.trim());
        }
        if fallback.is_none() && k.eq_ignore_ascii_case(key) {
            fallback = Some(v.trim());
        }
    }
    fallback
}

/// Does a request's header ask for an API level above ours (`412 Required Api Level`)?
pub fn requires_newer_api(hdr: Option<&[u8]>) -> bool {
    match hdr.and_then(|h| header_value(h, REQUIRED_API_LEVEL)) {
        None | Some("") => false,
        Some(v) => v.parse::<i64>().map_or(true, |lvl| lvl > API_LEVEL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain reading of the ack-subject rules, to check the fast parser against.
    fn parse_plain(s: &[u8]) -> Option<AckInfo> {
        let toks: Vec<&[u8]> = s.split(|&b| b == b'.').collect();
        if (toks.len() != 9 && toks.len() < 11) || toks[0] != b"$JS" || toks[1] != b"ACK" {
            return None;
        }
        let off = if toks.len() >= 11 { 4 } else { 2 };
        let num = |i: usize| -> Option<u64> {
            let t = toks[off + i];
            if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(t).ok()?.parse().ok()
        };
        Some(AckInfo {
            deliveries: num(2).unwrap_or(0),
            stream_seq: num(3).unwrap_or(0),
            consumer_seq: num(4).unwrap_or(0),
            ts: num(5).and_then(|n| i64::try_from(n).ok()).unwrap_or(-1),
            pending: num(6).unwrap_or(0),
        })
    }

    proptest! {
        #[test]
        fn fast_ack_parse_matches_the_plain_one(
            head in prop::sample::select(vec!["$JS.ACK.", "$JS.ACK.D.H.", "$JS.NAK.", ""]),
            toks in prop::collection::vec("[0-9]{0,22}|[0-9a-z/+-]{0,4}", 0..13),
        ) {
            let s = format!("{head}{}", toks.join("."));
            prop_assert_eq!(parse_ack_subject(s.as_bytes()), parse_plain(s.as_bytes()), "{}", s);
        }
    }

    #[test]
    fn ack_subjects_round_trip_and_v2() {
        let a = AckInfo {
            deliveries: 2,
            stream_seq: 7,
            consumer_seq: 5,
            ts: 1795975678023265724,
            pending: 3,
        };
        let s = ack_subject("ORDERS", "C1", &a);
        assert_eq!(s, "$JS.ACK.ORDERS.C1.2.7.5.1795975678023265724.3");
        assert_eq!(parse_ack_subject(&s), Some(a));
        let v2 = "$JS.ACK._.HASH.ORDERS.C1.2.7.5.1795975678023265724.3.tok";
        assert_eq!(parse_ack_subject(v2), Some(a));
        for bad in [
            "$JS.ACK.S.C.1.2.3.4",
            "$JS.NAK.S.C.1.2.3.4.5",
            "foo",
            "$JS.ACK.S.C.1.2.3.4.5.6",
        ] {
            assert_eq!(parse_ack_subject(bad), None, "{bad}");
        }
        assert_eq!(
            parse_ack_subject("$JS.ACK.S.C.x.2.3.4.5").map(|a| a.deliveries),
            Some(0)
        );
        // v2 with exactly 11 tokens; 10 tokens is neither form; bytes work as strings do.
        let v2 = parse_ack_subject(b"$JS.ACK.D.H.S.C.1.22.333.4444.5").unwrap();
        assert_eq!(
            (v2.deliveries, v2.stream_seq, v2.consumer_seq, v2.ts, v2.pending),
            (1, 22, 333, 4444, 5)
        );
        assert_eq!(parse_ack_subject("$JS.ACK.H.S.C.1.2.3.4.5"), None);
        // A number past u64 is not a number; an empty token neither.
        let big = parse_ack_subject("$JS.ACK.S.C.1.99999999999999999999999.3..5").unwrap();
        assert_eq!((big.stream_seq, big.ts, big.pending), (0, -1, 5));
    }

    #[test]
    fn ack_payloads() {
        let cases: [(&[u8], AckKind<'_>); 11] = [
            (b"", AckKind::Ack),
            (b"+ACK", AckKind::Ack),
            (b"+OK", AckKind::Ack),
            (b"-NAK", AckKind::Nak(None)),
            (b"-NAK {\"delay\": 2000000000}", AckKind::Nak(Some(2_000_000_000))),
            (b"-NAK 1.5s", AckKind::Nak(Some(1_500_000_000))),
            (b"-NAK soon", AckKind::Nak(None)),
            (b"+WPI", AckKind::Progress),
            (b"+NXT {\"batch\":2}", AckKind::Next(b" {\"batch\":2}")),
            (b"+TERM  bad data ", AckKind::Term("bad data".to_string())),
            (b"+ACKX", AckKind::Unknown),
        ];
        for (body, want) in cases {
            assert_eq!(parse_ack(body), want, "{:?}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn pull_bodies() {
        assert_eq!(parse_pull(b"").map(|p| p.batch), Ok(1));
        assert_eq!(parse_pull(b" 10 ").map(|p| p.batch), Ok(10));
        assert_eq!(parse_pull(b"junk").map(|p| p.batch), Ok(1));
        let p = parse_pull(
            br#"{"batch":5,"expires":1000000000,"max_bytes":100,"no_wait":true,"group":"g","priority":3,"x":1}"#,
        )
        .unwrap();
        assert_eq!(
            (p.batch, p.expires, p.max_bytes, p.no_wait),
            (5, 1_000_000_000, 100, true)
        );
        let g = p.group.unwrap();
        assert_eq!((g.group.as_str(), g.priority), ("g", 3));
        assert_eq!(
            parse_pull(br#"{"batch":1,"expires":1000,"idle_heartbeat":600}"#),
            Err("heartbeat value too large".to_string())
        );
        assert!(parse_pull(b"{bad").is_err());
    }

    #[test]
    fn headers() {
        assert_eq!(
            status_pending(408, "Request Timeout", 3, 0),
            b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n".to_vec()
        );
        assert_eq!(
            heartbeat(2, 5, "$JS.FC.S.C.abcd"),
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 2\r\nNats-Last-Stream: 5\r\nNats-Consumer-Stalled: $JS.FC.S.C.abcd\r\n\r\n"
                .to_vec()
        );
        assert_eq!(add_header(b"", "K", "v"), b"NATS/1.0\r\nK: v\r\n\r\n".to_vec());
        assert_eq!(
            add_header(b"NATS/1.0\r\nA: b\r\n\r\n", "K", "v"),
            b"NATS/1.0\r\nA: b\r\nK: v\r\n\r\n".to_vec()
        );
        let h = b"NATS/1.0\r\nNats-Required-Api-Level: 9\r\n\r\n";
        assert_eq!(header_value(h, REQUIRED_API_LEVEL), Some("9"));
        assert!(requires_newer_api(Some(h)));
        assert!(!requires_newer_api(Some(
            b"NATS/1.0\r\nNats-Required-Api-Level: 2\r\n\r\n"
        )));
        assert!(requires_newer_api(Some(
            b"NATS/1.0\r\nNats-Required-Api-Level: x\r\n\r\n"
        )));
        assert!(!requires_newer_api(None));
    }
}
