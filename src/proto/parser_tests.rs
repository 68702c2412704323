use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Connect(Vec<u8>),
    Info(Vec<u8>),
    Msg {
        subject: Vec<u8>,
        reply: Option<Vec<u8>>,
        hdr: Option<usize>,
        data: Vec<u8>,
        pedantic: bool,
    },
    Sub(Vec<u8>, Option<Vec<u8>>, Vec<u8>),
    Unsub(Vec<u8>, i64),
    Ping,
    Pong,
    Err(Vec<u8>),
    Fail(ParseError),
}

fn lim() -> Limits {
    Limits {
        max_control_line: 4096,
        max_payload: 1024 * 1024,
        headers: true,
        awaiting_auth: false,
        pedantic: false,
    }
}

/// Feed `chunks` one after another and collect the events, folding a
/// `PedanticViolation` into the message it belongs to.
fn run_with(chunks: &[&[u8]], l: Limits) -> Vec<Ev> {
    let mut p = Parser::default();
    let mut out = Vec::new();
    let mut pending_pedantic = false;
    for c in chunks {
        let mut pos = 0;
        loop {
            match p.next(c, &mut pos, &l) {
                Ok(None) => break,
                Ok(Some(e)) => {
                    let ev = match e {
                        Event::Connect(a) => Ev::Connect(a.to_vec()),
                        Event::Info(a) => Ev::Info(a.to_vec()),
                        Event::PedanticViolation => {
                            pending_pedantic = true;
                            continue;
                        }
                        Event::Msg {
                            subject,
                            reply,
                            header_len,
                            data,
                            ..
                        } => {
                            let ped = pending_pedantic;
                            pending_pedantic = false;
                            Ev::Msg {
                                subject: subject.to_vec(),
                                reply: reply.map(|r| r.to_vec()),
                                hdr: header_len,
                                data: data.to_vec(),
                                pedantic: ped,
                            }
                        }
                        Event::Sub { subject, queue, sid } => {
                            Ev::Sub(subject.to_vec(), queue.map(|q| q.to_vec()), sid.to_vec())
                        }
                        Event::Unsub { sid, max } => Ev::Unsub(sid.to_vec(), max),
                        Event::Ping => Ev::Ping,
                        Event::Pong => Ev::Pong,
                        Event::Err(a) => Ev::Err(a.to_vec()),
                    };
                    out.push(ev);
                    p.release();
                }
                Err(e) => {
                    out.push(Ev::Fail(e));
                    return out;
                }
            }
        }
    }
    out
}

fn run(input: &[u8]) -> Vec<Ev> {
    run_with(&[input], lim())
}

fn msg(subject: &str, reply: Option<&str>, data: &str) -> Ev {
    Ev::Msg {
        subject: subject.into(),
        reply: reply.map(Into::into),
        hdr: None,
        data: data.into(),
        pedantic: false,
    }
}

#[test]
fn basic_ops() {
    let evs = run(b"CONNECT {\"verbose\":false}\r\nPING\r\nPONG\r\nSUB foo 1\r\nSUB foo q 2\r\nUNSUB 1\r\nUNSUB 2 5\r\nPUB foo 5\r\nhello\r\nPUB foo bar 0\r\n\r\n+OK\r\n-ERR 'x'\r\n");
    assert_eq!(
        evs,
        vec![
            Ev::Connect(b"{\"verbose\":false}".to_vec()),
            Ev::Ping,
            Ev::Pong,
            Ev::Sub(b"foo".to_vec(), None, b"1".to_vec()),
            Ev::Sub(b"foo".to_vec(), Some(b"q".to_vec()), b"2".to_vec()),
            Ev::Unsub(b"1".to_vec(), -1),
            Ev::Unsub(b"2".to_vec(), 5),
            msg("foo", None, "hello"),
            msg("foo", Some("bar"), ""),
            Ev::Err(b"'x'".to_vec()),
        ]
    );
}

#[test]
fn case_insensitive_tabs_and_bare_newlines() {
    // protocol.md §1: op names are case-insensitive, args split on spaces and tabs, LF alone ends a line.
    let evs = run(b"pInG\npub\tfoo \t 2\nhi\r\nsUb\tfoo\t\t9\n");
    assert_eq!(
        evs,
        vec![
            Ev::Ping,
            msg("foo", None, "hi"),
            Ev::Sub(b"foo".to_vec(), None, b"9".to_vec())
        ]
    );
}

#[test]
fn ping_ignores_trailing_bytes() {
    assert_eq!(run(b"PING   x\r\nPINGX\r\n"), vec![Ev::Ping, Ev::Ping]);
}

#[test]
fn headers() {
    let evs = run(b"HPUB foo reply 12 14\r\nNATS/1.0\r\n\r\nhi\r\n");
    assert_eq!(
        evs,
        vec![Ev::Msg {
            subject: b"foo".to_vec(),
            reply: Some(b"reply".to_vec()),
            hdr: Some(12),
            data: b"NATS/1.0\r\n\r\nhi".to_vec(),
            pedantic: false
        }]
    );
    let mut l = lim();
    l.headers = false;
    assert_eq!(
        run_with(&[b"HPUB foo 12 14\r\n"], l),
        vec![Ev::Fail(ParseError::Silent("message headers not supported"))]
    );
    assert_eq!(
        run(b"HPUB foo 15 14\r\n"),
        vec![Ev::Fail(ParseError::Silent(
            "processHeaderPub Header Size larger then TotalSize"
        ))]
    );
}

#[test]
fn unknown_ops_fail_at_the_first_bad_byte() {
    for bad in [
        &b"X"[..],
        b"PX",
        b"PUBX",
        b"MSG foo 1 2\r\n",
        b"RS+ a b\r\n",
        b"LS+ x\r\n",
        b"A+ x\r\n",
        b"SUBX",
        b"CONNEX",
    ] {
        assert_eq!(
            run(bad),
            vec![Ev::Fail(ParseError::UnknownOp)],
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // An incomplete op name is not an error yet.
    assert_eq!(run(b"PIN"), vec![]);
    assert_eq!(run(b"CONNEC"), vec![]);
}

#[test]
fn payload_must_end_in_crlf() {
    assert_eq!(run(b"PUB foo 2\r\nhiX\r\n"), vec![Ev::Fail(ParseError::UnknownOp)]);
    assert_eq!(run(b"PUB foo 2\r\nhi\rX"), vec![Ev::Fail(ParseError::UnknownOp)]);
    assert_eq!(run(b"PUB foo 2\r\nhi\n"), vec![Ev::Fail(ParseError::UnknownOp)]);
}

#[test]
fn argument_errors_close_silently() {
    for (bad, why) in [
        (&b"PUB foo\r\n"[..], "processPub Parse Error"),
        (b"PUB a b c 1\r\n", "processPub Parse Error"),
        (b"PUB foo x\r\n", "processPub Bad or Missing Size"),
        (b"PUB foo -1\r\n", "processPub Bad or Missing Size"),
        (b"PUB foo 1234567890\r\n", "processPub Bad or Missing Size"),
        (b"SUB foo\r\n", "processSub Parse Error"),
        (b"SUB a b c d\r\n", "processSub Parse Error"),
        (b"UNSUB\t\r\n", "processUnsub Parse Error"),
        (b"UNSUB 1 2 3\r\n", "processUnsub Parse Error"),
    ] {
        assert_eq!(
            run(bad),
            vec![Ev::Fail(ParseError::Silent(why))],
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // A non-numeric UNSUB max is "no max".
    assert_eq!(run(b"UNSUB 1 x\r\n"), vec![Ev::Unsub(b"1".to_vec(), -1)]);
}

#[test]
fn max_payload_is_checked_on_the_control_line() {
    let mut l = lim();
    l.max_payload = 10;
    assert_eq!(
        run_with(&[b"PUB foo 11\r\n"], l),
        vec![Ev::Fail(ParseError::MaxPayload { size: 11, max: 10 })]
    );
    assert_eq!(
        run_with(&[b"PUB foo 10\r\n0123456789\r\n"], l),
        vec![msg("foo", None, "0123456789")]
    );
}

#[test]
fn control_line_limit_applies_to_incomplete_lines() {
    let mut l = lim();
    l.max_control_line = 16;
    // Complete but too long.
    assert_eq!(
        run_with(&[b"SUB aaaaaaaaaaaaaaaaaaaa 1\r\n"], l),
        vec![Ev::Fail(ParseError::MaxControlLine)]
    );
    // Never completed: the limit still fires, and across reads.
    assert_eq!(
        run_with(&[b"PUB aaaaaaaaaaaaaaaaaaaaaaaaa"], l),
        vec![Ev::Fail(ParseError::MaxControlLine)]
    );
    assert_eq!(
        run_with(&[b"PUB aaaaaaaaaa", b"aaaaaaaaaaaa"], l),
        vec![Ev::Fail(ParseError::MaxControlLine)]
    );
    // The op name and blanks before the argument do not count.
    assert_eq!(
        run_with(&[b"SUB                          foo 1\r\n"], l),
        vec![Ev::Sub(b"foo".to_vec(), None, b"1".to_vec())]
    );
}

#[test]
fn auth_required_means_connect_first() {
    let mut l = lim();
    l.awaiting_auth = true;
    assert_eq!(run_with(&[b"PING\r\n"], l), vec![Ev::Fail(ParseError::AuthViolation)]);
    assert_eq!(run_with(&[b"connect {}\r\n"], l), vec![Ev::Connect(b"{}".to_vec())]);
}

#[test]
fn pedantic_subjects() {
    let mut l = lim();
    l.pedantic = true;
    let evs = run_with(&[b"PUB foo.* 0\r\n\r\nPUB foo 0\r\n\r\n"], l);
    assert_eq!(
        evs,
        vec![
            Ev::Msg {
                subject: b"foo.*".to_vec(),
                reply: None,
                hdr: None,
                data: vec![],
                pedantic: true
            },
            msg("foo", None, "")
        ]
    );
    // Split payload: the violation is reported as soon as the line is complete.
    let mut p = Parser::default();
    let mut pos = 0;
    let first: &[u8] = b"PUB foo..bar 4\r\nab";
    assert_eq!(p.next(first, &mut pos, &l), Ok(Some(Event::PedanticViolation)));
}

#[test]
fn connect_without_space_and_client_hmsg() {
    assert_eq!(run(b"CONNECT{}\r\n"), vec![Ev::Connect(b"{}".to_vec())]);
    // nats-server parses a client's HMSG line and then expects an empty payload.
    assert_eq!(
        run(b"HMSG foo 1 2 2\r\n\r\n"),
        vec![Ev::Msg {
            subject: vec![],
            reply: None,
            hdr: None,
            data: vec![],
            pedantic: false
        }]
    );
    assert_eq!(
        run(b"HMSG foo 1 2 2\r\nPING\r\n"),
        vec![Ev::Fail(ParseError::UnknownOp)]
    );
}

#[test]
fn size_texts_are_kept_as_written() {
    let mut p = Parser::default();
    let mut pos = 0;
    let buf = b"HPUB h 012 0014\r\nNATS/1.0\r\n\r\nhi\r\n";
    match p.next(buf, &mut pos, &lim()) {
        Ok(Some(Event::Msg {
            size_text,
            hdr_text,
            header_len,
            ..
        })) => {
            assert_eq!(
                (size_text, hdr_text, header_len),
                (&b"0014"[..], Some(&b"012"[..]), Some(12))
            );
        }
        other => panic!("{other:?}"),
    }
    // Split across reads, the texts survive the move into the stash.
    let mut p = Parser::default();
    let (a, b) = buf.split_at(20);
    let mut pos = 0;
    assert_eq!(p.next(a, &mut pos, &lim()), Ok(None));
    let mut pos = 0;
    match p.next(b, &mut pos, &lim()) {
        Ok(Some(Event::Msg {
            size_text, hdr_text, ..
        })) => assert_eq!((size_text, hdr_text), (&b"0014"[..], Some(&b"012"[..]))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn large_payload_split_in_many_reads() {
    let payload = vec![b'x'; 1024 * 1024];
    let mut stream = b"PUB big 1048576\r\n".to_vec();
    stream.extend_from_slice(&payload);
    stream.extend_from_slice(b"\r\nPING\r\n");
    let chunks: Vec<&[u8]> = stream.chunks(65536).collect();
    let evs = run_with(&chunks, lim());
    assert_eq!(evs.len(), 2);
    match &evs[0] {
        Ev::Msg { data, .. } => assert_eq!(data.len(), payload.len()),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(evs[1], Ev::Ping);
}

const STREAM: &[u8] = b"CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB foo.* q 1\r\nPUB foo.bar reply 5\r\nhello\r\nHPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\nUNSUB 1 3\r\nPUB x 0\r\n\r\nPONG\r\n+OK\r\nINFO {}\r\nPUB foo 3\r\n\r\r\n\r\n";

proptest! {
    // protocol.md §1: frames split at any byte boundary across reads must parse the same.
    #[test]
    fn any_split_gives_the_same_events(cuts in proptest::collection::vec(0..STREAM.len(), 0..12)) {
        let mut cuts = cuts;
        cuts.sort();
        cuts.dedup();
        let mut chunks = Vec::new();
        let mut last = 0;
        for c in cuts {
            chunks.push(&STREAM[last..c]);
            last = c;
        }
        chunks.push(&STREAM[last..]);
        prop_assert_eq!(run_with(&chunks, lim()), run(STREAM));
    }

    // Arbitrary bytes never panic, and the parser holds at most a control line or payload.
    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512), split in 0usize..512) {
        let split = split.min(data.len());
        let mut l = lim();
        l.max_payload = 64;
        l.max_control_line = 64;
        let evs = run_with(&[&data[..split], &data[split..]], l);
        let _ = evs;
    }
}

#[test]
fn byte_by_byte_matches_whole() {
    let chunks: Vec<&[u8]> = STREAM.chunks(1).collect();
    assert_eq!(run_with(&chunks, lim()), run(STREAM));
    assert_eq!(run(STREAM).len(), 10);
}

/// Every event with all its fields (size texts included), and the position after it.
fn run_full(chunks: &[&[u8]], l: Limits, fast: bool) -> Vec<String> {
    let mut p = Parser {
        no_fast: !fast,
        ..Parser::default()
    };
    let mut out = Vec::new();
    let mut consumed = 0;
    for c in chunks {
        let mut pos = 0;
        loop {
            match p.next(c, &mut pos, &l) {
                Ok(None) => break,
                Ok(Some(e)) => {
                    out.push(format!("{e:?} @{}", consumed + pos));
                    p.release();
                }
                Err(e) => {
                    out.push(format!("{e:?} @{}", consumed + pos));
                    return out;
                }
            }
        }
        consumed += c.len();
    }
    out
}

/// Frames and near-frames around the whole-PUB and whole-HPUB fast path.
const PIECES: &[&[u8]] = &[
    b"PUB a 1\r\nx\r\n",
    b"pub a.b r 2\r\nxy\r\n",
    b"PuB  a   3\r\nabc\r\n",
    b"PUB\ta 1\r\nx\r\n",
    b"PUB a \t r\t 05\r\nhello\r\n",
    b"PUB a 0\r\n\r\n",
    b"PUB a 1\r\nxx\r\n",
    b"PUB a 1\r\nx\n",
    b"PUB a b c d 1\r\nx\r\n",
    b"PUB a 99999999999\r\n",
    b"PUB a 2000\r\n",
    b"PUB a 1\nx\r\n",
    b"PUB a\r 1\r\nx\r\n",
    b"PUB a x\r\n",
    b"PUB \r\n",
    b"PUB a 3\r\n\r\n\r\r\n",
    b"PUBa 1\r\n",
    b"PING\r\n",
    b"SUB a 1\r\n",
    b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"PUB",
    b" ",
    b"\r\n",
    b"PUB a 1 \r\nx\r\n",
    b"PUB a r 1 \r\nx\r\n",
    b"PUB a r  1\r\nx\r\n",
    b"PUB a 0000000001\r\nx\r\n",
    b"PUB a 000000001\r\nx\r\n",
    b"PUB foo.bar.baz _INBOX.x 3\r\nabc\r\n",
    b"pUb a 12\r\nhello world!\r\n",
    b"PUB a r 1\nx\r\n",
    b"PUB a r\t1\r\nx\r\n",
    b"PUB a\x01b 1\r\nx\r\n",
    b"PUB \xc3\xa9.t\xff 1\r\nx\r\n",
    b"PUB a.long.subject.of.more.than.sixteen.bytes _INBOX.abcdefghijklmnop.qr 10\r\n0123456789\r\n",
    b"HPUB a r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
    b"hpub a 2 2\r\nxy\r\n",
    b"HPUB a 3 2\r\nxy\r\n",
    b"HPUB a 2\r\nxy\r\n",
    b"HPUB a b c 1 1\r\nx\r\n",
    b"HPUB a x 1\r\nx\r\n",
    b"HPUB  a 1 1\r\nx\r\n",
    b"HPUB\ta 1 1\r\nx\r\n",
    b"HPUB a 0 0\r\n\r\n",
    b"HPUB a 1 2\r\nxyz\r\n",
    b"HPUB a 1 9999999999\r\n",
    b"HPUBa 1 1\r\n",
    b"HPUB a.long.subject.of.more.than.sixteen.bytes _INBOX.r 2 4\r\nhdpl\r\n",
];

proptest! {
    // The whole-frame PUB/HPUB path gives what the byte-wise path gives on the same reads:
    // events, their fields, errors and where each leaves the input.
    #[test]
    fn whole_pub_frames_match_the_bytewise_parse(
        picks in proptest::collection::vec(0..PIECES.len(), 1..12),
        cut in any::<prop::sample::Index>(),
        small in any::<bool>(),
        headers in any::<bool>(),
    ) {
        let stream: Vec<u8> = picks.iter().flat_map(|&i| PIECES[i].iter().copied()).collect();
        let mut l = lim();
        if small {
            l.max_payload = 2;
            l.max_control_line = 8;
        }
        l.headers = headers;
        prop_assert_eq!(run_full(&[&stream], l, true), run_full(&[&stream], l, false));
        let (a, b) = stream.split_at(cut.index(stream.len() + 1));
        prop_assert_eq!(run_full(&[a, b], l, true), run_full(&[a, b], l, false));
    }
}

/// Parts of a PUB/HPUB frame, each usually right and sometimes not.
const OPS_: &[&[u8]] = &[b"PUB", b"HPUB", b"pub", b"hPuB", b"PUB", b"HPUB", b"PING", b"PUBX"];
const SEPS: &[&[u8]] = &[b" ", b" ", b" ", b" ", b" ", b" ", b" ", b" ", b"  ", b"\t", b"", b"\r"];
const ARGS: &[&[u8]] = &[
    b"a",
    b"foo.bar",
    b"_INBOX.abcdefghijklmnop.q",
    b"0",
    b"1",
    b"2",
    b"3",
    b"12",
    b"016",
    b"x",
    b"\xff",
    b"1000000000",
];
const EOLS: &[&[u8]] = &[
    b"\r\n", b"\r\n", b"\r\n", b"\r\n", b"\r\n", b"\r\n", b"\n", b"\r", b"", b" \r\n",
];

/// A frame built from the parts above: op, arguments with their separators, end of line,
/// payload, end of payload.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    (
        0..OPS_.len(),
        proptest::collection::vec((0..SEPS.len(), 0..ARGS.len()), 1..5),
        0..EOLS.len(),
        0usize..5,
        0..EOLS.len(),
        any::<bool>(),
    )
        .prop_map(|(op, args, eol, payload, end, honest)| {
            let mut f = OPS_[op].to_vec();
            for &(sep, arg) in &args {
                f.extend_from_slice(SEPS[sep]);
                f.extend_from_slice(ARGS[arg]);
            }
            // Mostly a payload of the size the last argument says, to reach whole frames.
            let last = std::str::from_utf8(ARGS[args[args.len() - 1].1]).ok();
            let payload = match last.and_then(|t| t.parse::<usize>().ok()) {
                Some(n) if honest && n < 100 => n,
                _ => payload,
            };
            f.extend_from_slice(EOLS[eol]);
            f.extend(std::iter::repeat_n(b'y', payload));
            f.extend_from_slice(EOLS[end]);
            f
        })
}

proptest! {
    // Same comparison as above on generated frames, so the whole-frame path meets argument
    // counts, blanks, sizes and trailers in combinations nobody listed.
    #[test]
    fn generated_frames_match_the_bytewise_parse(
        frames in proptest::collection::vec(frame(), 1..8),
        cut in any::<prop::sample::Index>(),
        headers in any::<bool>(),
        small in any::<bool>(),
    ) {
        let stream = frames.concat();
        let mut l = lim();
        l.headers = headers;
        if small {
            l.max_payload = 2;
            l.max_control_line = 12;
        }
        prop_assert_eq!(run_full(&[&stream], l, true), run_full(&[&stream], l, false));
        let (a, b) = stream.split_at(cut.index(stream.len() + 1));
        prop_assert_eq!(run_full(&[a, b], l, true), run_full(&[a, b], l, false));
    }
}
