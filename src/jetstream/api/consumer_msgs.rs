//! The consumer's message-level wire formats: pull requests (`$JS.API.CONSUMER.MSG.NEXT`
//! bodies), the status messages a consumer answers with (`NATS/1.0 408 Request Timeout`
//! ...), ack reply subjects (`$JS.ACK...`, v1 and v2) and ack payloads (`+ACK`, `-NAK`,
//! `+WPI`, `+NXT`, `+TERM`), with nats-server 2.14's rules and texts.

pub use super::duration::{format_go_duration, parse_go_duration};
use crate::monitor::optjson::{self, f, Field, Kind, Val};

/// A pull request. Integers are Go's `int`/`int64` as sent; durations are nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullRequest {
    pub batch: i64,
    /// Request lifetime in nanoseconds (0: until fulfilled).
    pub expires: i64,
    pub max_bytes: i64,
    pub no_wait: bool,
    /// Nanoseconds.
    pub idle_heartbeat: i64,
    pub group: String,
    pub min_pending: i64,
    pub min_ack_pending: i64,
    pub id: String,
    pub priority: i64,
    /// The request was JSON, so it carries priority-group fields (the reference applies
    /// its priority checks to JSON requests only, empty fields included).
    pub is_json: bool,
}

impl PullRequest {
    /// The request an empty body stands for: one message, no expiry.
    pub fn single() -> PullRequest {
        PullRequest {
            batch: 1,
            ..PullRequest::default()
        }
    }
}

/// `bytes.TrimSpace`: leading and trailing white space (Unicode white space when the
/// bytes are UTF-8, ASCII white space otherwise).
fn trim_space(b: &[u8]) -> &[u8] {
    if let Ok(s) = std::str::from_utf8(b) {
        return s.trim().as_bytes();
    }
    let is_ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = b.iter().position(|c| !is_ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !is_ws(c)).map_or(start, |i| i + 1);
    b.get(start..end).unwrap_or_default()
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits that fit an int64.
fn atoi(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

const PULL_FIELDS: [Field; 10] = [
    f("expires", "", Kind::Duration),
    f("batch", "", Kind::Int),
    f("max_bytes", "", Kind::Int),
    f("no_wait", "", Kind::Bool),
    f("idle_heartbeat", "", Kind::Duration),
    f("group", "PriorityGroup", Kind::Str),
    f("min_pending", "PriorityGroup", Kind::Int64),
    f("min_ack_pending", "PriorityGroup", Kind::Int64),
    f("id", "PriorityGroup", Kind::Str),
    f("priority", "PriorityGroup", Kind::Int),
];

/// Decode a pull request body as the reference does: empty is one message; a body that
/// starts with `{` (after trimming white space) is JSON decoded leniently (keys matched
/// case-insensitively, unknown keys ignored); anything else is an integer batch size, or
/// one message when it is not a number. The error is the text the reference puts after
/// `400 Bad Request - ` (Go's JSON error, or `heartbeat value too large`).
pub fn parse_pull(body: &[u8]) -> Result<PullRequest, String> {
    let req = trim_space(body);
    if req.first() != Some(&b'{') {
        return Ok(PullRequest {
            batch: atoi(req).unwrap_or(1),
            ..PullRequest::default()
        });
    }
    let mut p = PullRequest {
        is_json: true,
        ..PullRequest::default()
    };
    for (name, v) in optjson::decode(req, "JSApiConsumerGetNextRequest", &PULL_FIELDS)? {
        match (name, v) {
            ("expires", Val::Int(n)) => p.expires = n,
            ("batch", Val::Int(n)) => p.batch = n,
            ("max_bytes", Val::Int(n)) => p.max_bytes = n,
            ("no_wait", Val::Bool(b)) => p.no_wait = b,
            ("idle_heartbeat", Val::Int(n)) => p.idle_heartbeat = n,
            ("group", Val::Str(s)) => p.group = s,
            ("min_pending", Val::Int(n)) => p.min_pending = n,
            ("min_ack_pending", Val::Int(n)) => p.min_ack_pending = n,
            ("id", Val::Str(s)) => p.id = s,
            ("priority", Val::Int(n)) => p.priority = n,
            _ => {}
        }
    }
    if p.idle_heartbeat > 0 && p.idle_heartbeat.wrapping_mul(2) > p.expires {
        return Err("heartbeat value too large".to_string());
    }
    Ok(p)
}

/// A headers-only status message as the consumer sends it:
/// `NATS/1.0 <code> <description>\r\n` then `<name>: <value>\r\n` per extra header, then
/// `\r\n`.
pub fn status_header(code: u16, description: &str, extra: &[(&str, String)]) -> Vec<u8> {
    let mut out = format!("NATS/1.0 {code} {description}\r\n");
    for (k, v) in extra {
        out.push_str(k);
        out.push_str(": ");
        out.push_str(v);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// Header names of pull status messages.
pub const PENDING_MSGS_HDR: &str = "Nats-Pending-Messages";
pub const PENDING_BYTES_HDR: &str = "Nats-Pending-Bytes";
pub const PIN_ID_HDR: &str = "Nats-Pin-Id";

/// A status with the request's remaining messages and bytes (`408 Request Timeout`,
/// `408 Interest Expired`, `409 Batch Completed`, `100 Idle Heartbeat`, ...).
pub fn status_with_pending(code: u16, description: &str, msgs: i64, bytes: i64) -> Vec<u8> {
    status_header(
        code,
        description,
        &[
            (PENDING_MSGS_HDR, msgs.to_string()),
            (PENDING_BYTES_HDR, bytes.to_string()),
        ],
    )
}

/// A `400 Bad Request - <detail>` status.
pub fn bad_request(detail: &str) -> Vec<u8> {
    status_header(400, &format!("Bad Request - {detail}"), &[])
}

/// What an ack reply subject carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckInfo {
    pub stream: String,
    pub consumer: String,
    /// Delivery count. Numeric fields that are not plain digits read as `u64::MAX`
    /// (`-1` for `timestamp`), as the reference's parser gives them.
    pub delivered: u64,
    pub stream_seq: u64,
    pub consumer_seq: u64,
    pub timestamp: i64,
    pub pending: u64,
    /// v2 only: the domain token (`_` for none reads as `None`).
    pub domain: Option<String>,
    /// v2 only: the account hash token.
    pub acc_hash: Option<String>,
}

/// The reference's ack number parser: decimal digits (wrapping on overflow), `-1` for
/// an empty or non-digit token.
fn ack_num(t: &str) -> i64 {
    if t.is_empty() {
        return -1;
    }
    let mut n: i64 = 0;
    for c in t.bytes() {
        if !c.is_ascii_digit() {
            return -1;
        }
        n = n.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
    }
    n
}

/// Parse an ack reply subject: v1 `$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>`
/// (exactly 9 tokens) or v2 `$JS.ACK.<domain>.<acchash>.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>`
/// (11 tokens or more; later tokens are ignored). `None` for anything else.
pub fn parse_ack_subject(subject: &str) -> Option<AckInfo> {
    let tokens: Vec<&str> = subject.split('.').collect();
    let n = tokens.len();
    if (n != 9 && n < 11) || tokens.first() != Some(&"$JS") || tokens.get(1) != Some(&"ACK") {
        return None;
    }
    let off = if n >= 11 { 4 } else { 2 };
    let tok = |i: usize| tokens.get(off + i).copied().unwrap_or_default();
    let (domain, acc_hash) = if off == 4 {
        let d = tokens.get(2).copied().unwrap_or_default();
        ((d != "_").then(|| d.to_string()), tokens.get(3).map(|h| h.to_string()))
    } else {
        (None, None)
    };
    Some(AckInfo {
        stream: tok(0).to_string(),
        consumer: tok(1).to_string(),
        delivered: ack_num(tok(2)) as u64,
        stream_seq: ack_num(tok(3)) as u64,
        consumer_seq: ack_num(tok(4)) as u64,
        timestamp: ack_num(tok(5)),
        pending: ack_num(tok(6)) as u64,
        domain,
        acc_hash,
    })
}

/// The v1 ack reply subject of a delivery.
pub fn ack_subject(stream: &str, consumer: &str, dc: u64, sseq: u64, cseq: u64, ts: i64, pending: u64) -> String {
    format!("$JS.ACK.{stream}.{consumer}.{dc}.{sseq}.{cseq}.{ts}.{pending}")
}

/// The v2 ack reply subject (feature flag `js_ack_fc_v2`); `domain` `None` writes `_`.
#[allow(clippy::too_many_arguments)]
pub fn ack_subject_v2(
    domain: Option<&str>,
    acc_hash: &str,
    stream: &str,
    consumer: &str,
    dc: u64,
    sseq: u64,
    cseq: u64,
    ts: i64,
    pending: u64,
) -> String {
    let d = domain.unwrap_or("_");
    format!("$JS.ACK.{d}.{acc_hash}.{stream}.{consumer}.{dc}.{sseq}.{cseq}.{ts}.{pending}")
}

/// An ack payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckKind {
    /// Empty, `+ACK` or `+OK` (exactly).
    Ack,
    /// `-NAK...`: `delay` in nanoseconds when a valid `{"delay": n}` or Go duration
    /// follows (a bad one is a plain NAK, as the reference only logs it).
    Nak { delay: Option<i64> },
    /// `+WPI` (exactly).
    Progress,
    /// `+NXT...`: ack, then the rest of the body as a pull request (or its error text).
    Next { request: Result<PullRequest, String> },
    /// `+TERM...` with the trimmed rest as the reason.
    Term { reason: String },
    /// Anything else: ignored (an ack reply is still sent when asked for).
    Unknown,
}

/// The delay of `-NAK {"delay": n}`: Go's lenient decoding into `{Delay time.Duration}`
/// (any key case, unknown keys ignored, the last matching key wins, `null` is zero).
fn nak_json_delay(arg: &[u8]) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_slice(arg).ok()?;
    let obj = v.as_object()?;
    let mut d = 0;
    for (k, v) in obj {
        if k.eq_ignore_ascii_case("delay") {
            match v {
                serde_json::Value::Null => {}
                serde_json::Value::Number(n) => d = n.as_i64()?,
                _ => return None,
            }
        }
    }
    Some(d)
}

/// Classify an ack payload with the reference's rules (`+ACK`, `+OK` and `+WPI` match
/// exactly; `+NXT`, `-NAK` and `+TERM` are prefixes).
pub fn parse_ack(body: &[u8]) -> AckKind {
    if body.is_empty() || body == b"+ACK" || body == b"+OK" {
        return AckKind::Ack;
    }
    if let Some(rest) = body.strip_prefix(b"+NXT") {
        return AckKind::Next {
            request: parse_pull(rest),
        };
    }
    if let Some(rest) = body.strip_prefix(b"-NAK") {
        let arg = trim_space(rest);
        let delay = match arg.first() {
            None => None,
            Some(b'{') => nak_json_delay(arg),
            Some(_) => std::str::from_utf8(arg).ok().and_then(parse_go_duration),
        };
        return AckKind::Nak { delay };
    }
    if body == b"+WPI" {
        return AckKind::Progress;
    }
    if let Some(rest) = body.strip_prefix(b"+TERM") {
        return AckKind::Term {
            reason: String::from_utf8_lossy(trim_space(rest)).into_owned(),
        };
    }
    AckKind::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: i64) -> Result<PullRequest, String> {
        Ok(PullRequest {
            batch: n,
            ..PullRequest::default()
        })
    }

    /// Texts captured from the reference answering `$JS.API.CONSUMER.MSG.NEXT` (the part
    /// after `NATS/1.0 400 Bad Request - `).
    #[test]
    fn pull_bodies() {
        let cases: &[(&str, Result<PullRequest, String>)] = &[
            ("", batch(1)),
            ("2", batch(2)),
            (" 1 \r\n", batch(1)),
            ("-5", batch(-5)),
            ("abc", batch(1)),
            ("[1]", batch(1)),
            ("null", batch(1)),
            ("{", Err("unexpected end of JSON input".into())),
            (
                r#"{"batch":"x"}"#,
                Err("json: cannot unmarshal string into Go struct field JSApiConsumerGetNextRequest.batch of type int".into()),
            ),
            (
                r#"{"group":5}"#,
                Err("json: cannot unmarshal number into Go struct field JSApiConsumerGetNextRequest.PriorityGroup.group of type string".into()),
            ),
            (
                r#"{"min_pending":"x"}"#,
                Err("json: cannot unmarshal string into Go struct field JSApiConsumerGetNextRequest.PriorityGroup.min_pending of type int64".into()),
            ),
            (
                r#"{"expires":1.5}"#,
                Err("json: cannot unmarshal number 1.5 into Go struct field JSApiConsumerGetNextRequest.expires of type time.Duration".into()),
            ),
            (
                r#"{"batch":1,"idle_heartbeat":1000000000,"expires":1000000000}"#,
                Err("heartbeat value too large".into()),
            ),
            (r#"{"batch":1} x"#, Err("invalid character 'x' after top-level value".into())),
        ];
        for (body, want) in cases {
            assert_eq!(&parse_pull(body.as_bytes()), want, "{body:?}");
        }
        let p = parse_pull(br#"{"Batch":3,"NO_WAIT":true,"bogus":1,"expires":2000000000,"idle_heartbeat":1000000000,"group":"g","min_pending":4,"min_ack_pending":5,"id":"pin","priority":2,"max_bytes":7}"#).unwrap();
        assert_eq!(
            p,
            PullRequest {
                batch: 3,
                expires: 2_000_000_000,
                max_bytes: 7,
                no_wait: true,
                idle_heartbeat: 1_000_000_000,
                group: "g".into(),
                min_pending: 4,
                min_ack_pending: 5,
                id: "pin".into(),
                priority: 2,
                is_json: true,
            }
        );
        assert_eq!(parse_pull(b"{}").unwrap().batch, 0);
    }

    #[test]
    fn status_lines() {
        assert_eq!(
            status_with_pending(408, "Request Timeout", 3, 0),
            b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n"
        );
        assert_eq!(
            status_header(404, "No Messages", &[]),
            b"NATS/1.0 404 No Messages\r\n\r\n"
        );
        assert_eq!(
            bad_request("heartbeat value too large"),
            b"NATS/1.0 400 Bad Request - heartbeat value too large\r\n\r\n"
        );
        assert_eq!(
            status_header(
                409,
                &format!("Exceeded MaxRequestExpires of {}", format_go_duration(5_000_000_000)),
                &[]
            ),
            b"NATS/1.0 409 Exceeded MaxRequestExpires of 5s\r\n\r\n"
        );
    }

    #[test]
    fn ack_subjects() {
        let s = ack_subject("ORDERS", "wK3da9cz", 1, 2, 3, 1795975678023265724, 5);
        assert_eq!(s, "$JS.ACK.ORDERS.wK3da9cz.1.2.3.1795975678023265724.5");
        let a = parse_ack_subject(&s).unwrap();
        assert_eq!(
            (
                a.stream.as_str(),
                a.consumer.as_str(),
                a.delivered,
                a.stream_seq,
                a.consumer_seq,
                a.timestamp,
                a.pending
            ),
            ("ORDERS", "wK3da9cz", 1, 2, 3, 1795975678023265724, 5)
        );
        assert_eq!((a.domain, a.acc_hash), (None, None));

        let v2 = ack_subject_v2(Some("hub"), "HASH", "S", "C", 2, 10, 7, 99, 0);
        let b = parse_ack_subject(&v2).unwrap();
        assert_eq!(
            (b.domain.as_deref(), b.acc_hash.as_deref()),
            (Some("hub"), Some("HASH"))
        );
        assert_eq!(
            (b.stream.as_str(), b.consumer.as_str(), b.delivered, b.stream_seq),
            ("S", "C", 2, 10)
        );
        let b = parse_ack_subject(&format!(
            "{}.extra.more",
            ack_subject_v2(None, "H", "S", "C", 1, 1, 1, 1, 1)
        ))
        .unwrap();
        assert_eq!((b.domain, b.pending), (None, 1));

        for bad in [
            "$JS.ACK.S.C.1.1.1.1",
            "$JS.ACK.S.C.1.1.1.1.1.1",
            "$JS.NAK.S.C.1.1.1.1.1",
            "JS.ACK.S.C.1.1.1.1.1",
            "",
        ] {
            assert_eq!(parse_ack_subject(bad), None, "{bad}");
        }
        let odd = parse_ack_subject("$JS.ACK.S.C.x..1.-2.1").unwrap();
        assert_eq!(
            (odd.delivered, odd.stream_seq, odd.consumer_seq, odd.timestamp),
            (u64::MAX, u64::MAX, 1, -1)
        );
    }

    #[test]
    fn ack_payloads() {
        let cases: &[(&[u8], AckKind)] = &[
            (b"", AckKind::Ack),
            (b"+ACK", AckKind::Ack),
            (b"+OK", AckKind::Ack),
            (b"+ACK ", AckKind::Unknown),
            (b"junk", AckKind::Unknown),
            (b"-NAK", AckKind::Nak { delay: None }),
            (
                b"-NAK 1s",
                AckKind::Nak {
                    delay: Some(1_000_000_000),
                },
            ),
            (b"-NAK  {\"delay\": 5000}", AckKind::Nak { delay: Some(5000) }),
            (b"-NAK {\"DELAY\": 7, \"x\": 1}", AckKind::Nak { delay: Some(7) }),
            (b"-NAK {\"delay\": null}", AckKind::Nak { delay: Some(0) }),
            (b"-NAK {\"delay\": \"1s\"}", AckKind::Nak { delay: None }),
            (b"-NAK {\"delay\": 1.5}", AckKind::Nak { delay: None }),
            (b"-NAK bogus", AckKind::Nak { delay: None }),
            (
                b"-NAK -1s",
                AckKind::Nak {
                    delay: Some(-1_000_000_000),
                },
            ),
            (b"+WPI", AckKind::Progress),
            (b"+WPI ", AckKind::Unknown),
            (b"+TERM", AckKind::Term { reason: String::new() }),
            (
                b"+TERM  bad msg \n",
                AckKind::Term {
                    reason: "bad msg".into(),
                },
            ),
            (b"+NXT", AckKind::Next { request: batch(1) }),
            (b"+NXT 10", AckKind::Next { request: batch(10) }),
            (
                b"+NXT {",
                AckKind::Next {
                    request: Err("unexpected end of JSON input".into()),
                },
            ),
        ];
        for (body, want) in cases {
            assert_eq!(&parse_ack(body), want, "{:?}", String::from_utf8_lossy(body));
        }
    }
}
