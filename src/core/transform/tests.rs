//! Tests of `SubjectTransform`. Expected values marked "observed" were read from the
//! reference nats-server 2.14.0: mapped subjects by running it with `mappings { ... }` (or a
//! JetStream republish transform for `left`/`right`, which account mappings refuse),
//! subscribing to `>` over raw TCP and publishing; error texts from `nats-server -t`.

use super::*;

fn no_rand() -> u64 {
    panic!("this transform draws no random number")
}

fn map(src: &str, dest: &str, subject: &str) -> Option<String> {
    let tr = SubjectTransform::new(src, dest).unwrap_or_else(|e| panic!("{src} -> {dest}: {e}"));
    tr.match_and_transform(subject.as_bytes(), &mut no_rand)
        .map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn observed_mapped_subjects() {
    // (source, destination, published, delivered) -- observed on the reference 2.14.0.
    let table: &[(&str, &str, &str, &str)] = &[
        ("id.*", "id.$1", "id.x", "id.x"),
        ("sw.*.*", "sw.$2.$1", "sw.a.b", "sw.b.a"),
        ("fw.*.>", "FW.{{wildcard(1)}}.>", "fw.a.b.c", "FW.a.b.c"),
        ("fw.*.>", "FW.{{wildcard(1)}}.>", "fw.a.b", "FW.a.b"),
        ("all.>", ">", "all.q.r", "q.r"),
        ("pre.>", "x.y.>", "pre.z", "x.y.z"),
        // Partitions: FNV-1a 32 over the selected tokens concatenated, modulo n.
        ("p.*.*", "P.{{partition(10,1,2)}}.$1.$2", "p.a.b", "P.6.a.b"),
        ("p.*.*", "P.{{partition(10,1,2)}}.$1.$2", "p.foo.bar", "P.0.foo.bar"),
        ("p.*.*", "P.{{partition(10,1,2)}}.$1.$2", "p.x.y", "P.2.x.y"),
        ("q.>", "Q.{{partition(7)}}.>", "q.a", "Q.6.a"),
        ("q.>", "Q.{{partition(7)}}.>", "q.a.b.c", "Q.5.a.b.c"),
        ("p1.*", "P1.{{partition(3,1)}}", "p1.a", "P1.1"),
        ("p1.*", "P1.{{partition(3,1)}}", "p1.b", "P1.1"),
        ("p1.*", "P1.{{partition(3,1)}}", "p1.c", "P1.2"),
        ("p1.*", "P1.{{partition(3,1)}}", "p1.foo", "P1.0"),
        ("p1.*", "P1.{{partition(3,1)}}", "p1.bar", "P1.2"),
        ("p2.*.*", "P2.{{partition(5,2,1)}}.$1", "p2.x.y", "P2.4.x"),
        ("p2.*.*", "P2.{{partition(5,2,1)}}.$1", "p2.y.x", "P2.2.y"),
        ("p2.*.*", "P2.{{partition(5,2,1)}}.$1", "p2.hello.world", "P2.4.hello"),
        ("p3.>", "P3.{{partition(16)}}.>", "p3.a", "P3.13.a"),
        ("p3.>", "P3.{{partition(16)}}.>", "p3.a.b", "P3.1.a.b"),
        ("p3.>", "P3.{{partition(16)}}.>", "p3.a.b.c", "P3.10.a.b.c"),
        ("p4.*.*", "P4.{{partition(1000,1,2)}}", "p4.a.b", "P4.946"),
        ("p4.*.*", "P4.{{partition(1000,1,2)}}", "p4.ab.c", "P4.331"),
        ("p4.*.*", "P4.{{partition(1000,1,2)}}", "p4.alpha.beta", "P4.345"),
        ("p5.*", "P5.{{partition(0)}}", "p5.q", "P5.0"),
        ("p6.*", "P6.{{Partition(7, 1)}}", "p6.a", "P6.5"),
        ("p6.*", "P6.{{Partition(7, 1)}}", "p6.zz", "P6.0"),
        ("p0.*", "P0.{{partition(0,1)}}", "p0.a", "P0.0"),
        // A negative bucket count is taken as uint32.
        ("pn.*", "PN.{{partition(-3,1)}}", "pn.a", "PN.3826002220"),
        ("pn.*", "PN.{{partition(-3,1)}}", "pn.b", "PN.3876335077"),
        ("pn.*", "PN.{{partition(-3,1)}}", "pn.hello", "PN.1335831723"),
        // A literal source: partition(n) hashes the whole subject.
        ("lit", "L.{{partition(10)}}", "lit", "L.0"),
        // split
        ("s.*", "S.{{split(1,-)}}", "s.a-b-c", "S.a.b.c"),
        ("s.*", "S.{{split(1,-)}}", "s.-a--b-", "S.a.b"),
        ("s.*", "S.{{split(1,-)}}", "s.abc", "S.abc"),
        ("e.*", "E.{{split(1,)}}", "e.abc", "E.a.b.c"),
        ("e.*", "E.{{split(1,)}}", "e.héllo", "E.h.é.l.l.o"),
        ("s2.*", "S2.{{split(1,ab)}}", "s2.xabyabz", "S2.x.y.z"),
        ("s3.*", "S3.{{split(1,-)}}.end", "s3.-x-", "S3.x.end"),
        ("s3.*", "S3.{{split(1,-)}}.end", "s3.x", "S3.x.end"),
        (
            "multi.*.*",
            "M.{{wildcard(2)}}.{{split(1,_)}}.$2",
            "multi.a_b_c.Q",
            "M.Q.a.b.c.Q",
        ),
        // splitFromLeft / splitFromRight
        ("sl.*", "SL.{{splitFromLeft(1,2)}}", "sl.abcde", "SL.ab.cde"),
        ("sl.*", "SL.{{splitFromLeft(1,2)}}", "sl.ab", "SL.ab"),
        ("sl.*", "SL.{{splitFromLeft(1,2)}}", "sl.a", "SL.a"),
        ("sr.*", "SR.{{SplitFromRight(1,2)}}", "sr.abcde", "SR.abc.de"),
        ("sr.*", "SR.{{SplitFromRight(1,2)}}", "sr.ab", "SR.ab"),
        ("sfl.*", "SFL.{{splitFromLeft(1,3)}}", "sfl.abcdefg", "SFL.abc.defg"),
        ("sfl.*", "SFL.{{splitFromLeft(1,3)}}", "sfl.abc", "SFL.abc"),
        ("sfr.*", "SFR.{{splitFromRight(1,3)}}", "sfr.abcdefg", "SFR.abcd.efg"),
        ("sfr.*", "SFR.{{splitFromRight(1,3)}}", "sfr.abc", "SFR.abc"),
        // sliceFromLeft / sliceFromRight
        ("xl.*", "XL.{{sliceFromLeft(1,2)}}", "xl.abcde", "XL.ab.cd.e"),
        ("xl.*", "XL.{{sliceFromLeft(1,2)}}", "xl.abcdef", "XL.ab.cd.ef"),
        ("xl.*", "XL.{{sliceFromLeft(1,2)}}", "xl.ab", "XL.ab"),
        ("xr.*", "XR.{{sliceFromRight(1,2)}}", "xr.abcde", "XR.a.bc.de"),
        ("xr.*", "XR.{{sliceFromRight(1,2)}}", "xr.abcdef", "XR.ab.cd.ef"),
        ("xr.*", "XR.{{sliceFromRight(1,2)}}", "xr.a", "XR.a"),
        ("slr.*", "SLR.{{sliceFromRight(1,3)}}", "slr.abcdefg", "SLR.a.bcd.efg"),
        ("slr.*", "SLR.{{sliceFromRight(1,3)}}", "slr.abcdef", "SLR.abc.def"),
        ("sll.*", "SLL.{{sliceFromLeft(1,3)}}", "sll.abcdefg", "SLL.abc.def.g"),
        ("sll.*", "SLL.{{sliceFromLeft(1,3)}}", "sll.abc", "SLL.abc"),
        (
            "sl0.*",
            "SL0.{{sliceFromLeft(1,0)}}.{{splitFromLeft(1,-1)}}",
            "sl0.abc",
            "SL0.abc.abc",
        ),
        // left / right (observed through a stream republish transform)
        (
            "lr.*",
            "LR.{{left(1,2)}}.{{right(1,2)}}.{{Left(1,0)}}.{{Right(1,9)}}",
            "lr.abcdef",
            "LR.ab.ef.abcdef.abcdef",
        ),
        (
            "lr.*",
            "LR.{{left(1,2)}}.{{right(1,2)}}.{{Left(1,0)}}.{{Right(1,9)}}",
            "lr.ab",
            "LR.ab.ab.ab.ab",
        ),
        (
            "lr.*",
            "LR.{{left(1,2)}}.{{right(1,2)}}.{{Left(1,0)}}.{{Right(1,9)}}",
            "lr.a",
            "LR.a.a.a.a",
        ),
        (
            "t.*.*",
            "T.{{ left ( 2 , 1 ) }}.{{right(1,-1)}}",
            "t.xyz.abc",
            "T.a.xyz",
        ),
        // Odd references the reference accepts: $0 and negative numbers name token 0,
        // `$x`/`$1x` stay literal, `+1` and `01` are 1, and the function pattern is unanchored.
        ("w0.*", "W0.$0.{{wildcard(-2)}}", "w0.zz", "W0.w0.w0"),
        ("dd.*", "DD.$x.$1x.$-1.$+1.$01", "dd.q", "DD.$x.$1x.dd.q.q"),
        ("cc.*", "CC.{{x}}{{wildcard(1)}}", "cc.v", "CC.v"),
        (
            "sp.*",
            "SP.{{ wildcard( 1 ) }}.{{partition( 4 , 1 )}}",
            "sp.abc",
            "SP.abc.3",
        ),
        ("e3.*", "x.{{split(-1,-)}}", "e3.a", "x.e3"),
        // A source token that starts with `*` matches any token (subset match quirk).
        ("a.*x", "B", "a.zz", "B"),
        ("a.*x", "B", "a.*x", "B"),
        ("c.*y.*", "D.$1", "c.k.m", "D.m"),
    ];
    for &(src, dest, subject, want) in table {
        assert_eq!(
            map(src, dest, subject).as_deref(),
            Some(want),
            "{src} -> {dest} on {subject}"
        );
    }
}

#[test]
fn outputs_with_empty_tokens() {
    // The reference delivered nothing for these (the mapped subjects have empty tokens);
    // the texts follow its split rule.
    for (subject, want) in [("s.--a", "S..a"), ("s.-", "S.")] {
        assert_eq!(map("s.*", "S.{{split(1,-)}}", subject).as_deref(), Some(want));
    }
    assert_eq!(map("s2.*", "S2.{{split(1,ab)}}", "s2.ab").as_deref(), Some("S2."));
    assert_eq!(map("s2.*", "S2.{{split(1,ab)}}", "s2.abab").as_deref(), Some("S2."));
}

#[test]
fn not_matching() {
    for (src, dest, subject) in [
        ("foo.*", "bar.$1", "foo"),
        ("foo.*", "bar.$1", "foo.a.b"),
        ("foo.*", "bar.$1", "baz.a"),
        ("foo.>", "bar.>", "foo"),
        ("foo", "bar", "foo.x"),
        // Not a valid literal subject.
        ("foo.*", "bar.$1", "foo.*"),
        ("foo.>", "bar.>", "foo.>"),
        ("foo.*", "bar.$1", "foo."),
        ("foo.>", "bar.>", "foo..x"),
        ("a.*x", "B", "a.q.r"),
        ("c.*y.*", "D.$1", "c.*.m"),
    ] {
        assert_eq!(map(src, dest, subject), None, "{src} -> {dest} on {subject}");
    }
    let tr = SubjectTransform::new("foo.*", "bar.$1").unwrap();
    assert_eq!(tr.try_match(b"foo..", &mut no_rand), Err(TransformError::BadSubject));
    assert_eq!(tr.try_match(b"x.y", &mut no_rand), Err(TransformError::NoTransforms));
    assert_eq!(
        tr.try_match(b"x.y", &mut no_rand).unwrap_err().to_string(),
        "no matching transforms available"
    );
}

#[test]
fn passthrough_and_empty_source() {
    // `>` to `>` returns any subject unchecked; an empty source means `>`.
    let tr = SubjectTransform::new(">", ">").unwrap();
    assert_eq!(
        tr.match_and_transform(b"a..b", &mut no_rand).as_deref(),
        Some(&b"a..b"[..])
    );
    let tr = SubjectTransform::new("", "x.>").unwrap();
    assert_eq!(tr.source(), ">");
    assert_eq!(
        tr.match_and_transform(b"a.b", &mut no_rand).as_deref(),
        Some(&b"x.a.b"[..])
    );
    // An empty destination is the identity of the source, whatever the source.
    let tr = SubjectTransform::new("a.*.>", "").unwrap();
    assert_eq!(tr.destination(), "a.$1.>");
    assert_eq!(
        tr.match_and_transform(b"a.b.c.d", &mut no_rand).as_deref(),
        Some(&b"a.b.c.d"[..])
    );
    let tr = SubjectTransform::new_strict("a.$1.*x", "").unwrap();
    assert_eq!(
        tr.match_and_transform(b"a.$1.q", &mut no_rand).as_deref(),
        Some(&b"a.$1.*x"[..])
    );
    let tr = SubjectTransform::new("a..b", "").unwrap();
    assert_eq!(tr.match_and_transform(b"a.b", &mut no_rand), None);
    for src in [">.", "a.>.b"] {
        let tr = SubjectTransform::new(src, "").unwrap();
        assert_eq!(
            tr.match_and_transform(b"a.x.y", &mut no_rand).as_deref(),
            Some(&b"a.x.y"[..]),
            "{src}"
        );
    }
    // Unlike the remainder a weighted mapping adds, which reads `$1` (observed: "a.$1"
    // with one 50% destination fails with "wildcard index out of range in $1", while
    // "c.$1" at 100% is accepted).
    assert_eq!(
        Mapping::new("a.$1", &[MapDest::new("b", 50)]).unwrap_err().to_string(),
        "invalid mapping destination: wildcard index out of range in $1"
    );
    Mapping::new("c.$1", &[MapDest::new("d", 100)]).unwrap();
    Mapping::new("c.$1", &[MapDest::new("", 100)]).unwrap();
}

#[test]
fn random_uses_the_callers_draws() {
    let tr = SubjectTransform::new("r.*", "R.{{random(5)}}.{{random(0)}}.{{random(-3)}}").unwrap();
    // Go's rand.Int31() is the top 31 bits of the draw.
    let mut draws = [7u64 << 33, 9 << 33, 8 << 33].into_iter();
    let mut rand = || draws.next().unwrap();
    assert_eq!(
        tr.match_and_transform(b"r.a", &mut rand).as_deref(),
        Some(&b"R.2.0.2"[..])
    );
    // Observed: random(5) spread over 0..5 and random(0) always 0 on the reference.
    let mut seed = 1u64;
    let mut rand = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        seed
    };
    let mut seen = [0u32; 5];
    for _ in 0..500 {
        let out = tr.match_and_transform(b"r.a", &mut rand).unwrap();
        let n = usize::from(out[2] - b'0');
        assert!(
            out.ends_with(b".0.0") || out.ends_with(b".0.1") || out.ends_with(b".0.2"),
            "{out:?}"
        );
        seen[n] += 1;
    }
    assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
}

#[test]
fn transform_tokens_and_subject() {
    let tr = SubjectTransform::new("a.*.*.>", "b.$2.{{partition(10)}}.$1.>").unwrap();
    let toks: [&[u8]; 5] = [b"a", b"x", b"y", b"z", b"w"];
    let via_tokens = tr.transform(&toks, &mut no_rand);
    assert_eq!(via_tokens, tr.transform_subject(b"a.x.y.z.w", &mut no_rand));
    assert_eq!(Some(via_tokens), tr.match_and_transform(b"a.x.y.z.w", &mut no_rand));
    // Too few tokens never panic: missing ones read as empty.
    assert_eq!(tr.transform(&[b"a"], &mut no_rand), b"b..0.."[..].to_vec());
}

/// `Error adding mapping for "<src>" to "<dest>" : <text>` -- the texts observed from
/// `nats-server -t` (2.14.0) with these mappings.
const OBSERVED_MAPPING_ERRORS: &[(&str, &str, &str)] = &[
    (
        "a1.*",
        "x.{{wildcard()}}",
        "not enough arguments passed to the function in {{wildcard()}}",
    ),
    (
        "a2.*",
        "x.{{wildcard(1,2)}}",
        "too many arguments passed to the function in {{wildcard(1,2)}}",
    ),
    (
        "a3.*",
        "x.{{wildcard(a)}}",
        "function argument is invalid or in the wrong format in {{wildcard(a)}}",
    ),
    (
        "a4.*",
        "x.{{partition()}}",
        "function argument is invalid or in the wrong format in {{partition()}}",
    ),
    (
        "a5.*",
        "x.{{partition(a,1)}}",
        "function argument is invalid or in the wrong format in {{partition(a,1)}}",
    ),
    (
        "a6.*",
        "x.{{partition(3000000000,1)}}",
        "function argument is invalid or in the wrong format in {{partition(3000000000,1)}}",
    ),
    (
        "a7.*",
        "x.{{splitFromLeft(1)}}",
        "not enough arguments passed to the function in {{splitFromLeft(1)}}",
    ),
    (
        "a8.*",
        "x.{{splitFromLeft(1,2,3)}}",
        "too many arguments passed to the function in {{splitFromLeft(1,2,3)}}",
    ),
    (
        "a9.*",
        "x.{{splitFromLeft(1,a)}}",
        "function argument is invalid or in the wrong format in {{splitFromLeft(1,a)}}",
    ),
    (
        "b1.*",
        "x.{{splitFromLeft(1,3000000000)}}",
        "function argument is invalid or in the wrong format in {{splitFromLeft(1,3000000000)}}",
    ),
    (
        "b2.*",
        "x.{{split(1)}}",
        "not enough arguments passed to the function in {{split(1)}}",
    ),
    (
        "b3.*",
        "x.{{split(1,a,b)}}",
        "too many arguments passed to the function in {{split(1,a,b)}}",
    ),
    (
        "b4.*",
        "x.{{split(1,a b)}}",
        "function argument is invalid or in the wrong format in {{split(1,a b)}}",
    ),
    (
        "b5.*",
        "x.{{random()}}",
        "function argument is invalid or in the wrong format in {{random()}}",
    ),
    (
        "b6.*",
        "x.{{random(1,2)}}",
        "not enough arguments passed to the function in {{random(1,2)}}",
    ),
    (
        "b7.*",
        "x.{{random(a)}}",
        "function argument is invalid or in the wrong format in {{random(a)}}",
    ),
    ("b8.*", "x.{{foo(1)}}", "unknown function in {{foo(1)}}"),
    ("c3.*", "x..y", "invalid transform"),
    ("c4.*", "x y", "invalid transform"),
    (
        "c5",
        "x.{{wildcard(1)}}",
        "wildcard index out of range in {{wildcard(1)}}",
    ),
    (
        "c6",
        "x.{{split(1,-)}}",
        "wildcard index out of range in {{split(1,-)}}",
    ),
    (
        "c8.*",
        "x.{{splitFromRight(2,1)}}",
        "wildcard index out of range in {{splitFromRight(2,1)}}: [2]",
    ),
    ("c9.*.>", "x.$2.>", "wildcard index out of range in $2: [2]"),
    (
        "d1.*",
        "x.{{random(3000000000)}}",
        "function argument is invalid or in the wrong format in {{random(3000000000)}}",
    ),
    (
        "d2.*",
        "x.{{sliceFromLeft(1)}}",
        "not enough arguments passed to the function in {{sliceFromLeft(1)}}",
    ),
    (
        "d3.*",
        "x.{{sliceFromRight(a,1)}}",
        "function argument is invalid or in the wrong format in {{sliceFromRight(a,1)}}",
    ),
    ("d6.*", ">.x", "invalid transform in x"),
    ("d9.*", "x.{{ }}", "unknown function in {{ }}"),
    ("a", "b.{{left(1,2)}}", "unknown function in {{left(1,2)}}"),
    ("c.*", "d.{{left(1,2)}}", "unknown function in {{left(1,2)}}"),
    ("e.*", "f.{{WILDCARD(1)}}", "unknown function in {{WILDCARD(1)}}"),
    (
        "i.*",
        "j.{{wildcard(2)}}",
        "wildcard index out of range in {{wildcard(2)}}: [2]",
    ),
    ("k", "l.$1", "wildcard index out of range in $1"),
    (
        "m.*.*",
        "n.{{partition(3,1,x)}}",
        "function argument is invalid or in the wrong format in {{partition(3,1,x)}}",
    ),
];

#[test]
fn observed_mapping_error_texts() {
    for &(src, dest, want) in OBSERVED_MAPPING_ERRORS {
        let err = validate_mapping(src, dest).expect_err(dest);
        assert_eq!(
            err.to_string(),
            format!("invalid mapping destination: {want}"),
            "{src} -> {dest}"
        );
        let err = Mapping::simple(src, dest).expect_err(dest);
        assert_eq!(
            err.to_string(),
            format!("invalid mapping destination: {want}"),
            "{src} -> {dest}"
        );
    }
    // Observed: "invalid subject" for these.
    for (src, dest) in [
        ("b9.*", "x.*"),
        ("c1.*", "x.>"),
        ("c2.>", "x"),
        ("d5.*", "{{wildcard(1)}}.>"),
    ] {
        assert_eq!(
            Mapping::simple(src, dest).unwrap_err().to_string(),
            "invalid subject",
            "{src} -> {dest}"
        );
        assert_eq!(
            SubjectTransform::new(src, dest).unwrap_err(),
            TransformError::BadSubject
        );
    }
    // Observed as accepted.
    for (src, dest) in [
        ("c7", "x.{{random(3)}}.{{partition(3,1)}}"),
        ("d4.*", "x.{{ wildcard (1) }}"),
        ("d8.*", "x.{{}}"),
        ("e1.*", "x.{{wildcard(1)}"),
        ("e2.*", "x.{{random(-1)}}"),
        ("e3.*", "x.{{split(-1,-)}}"),
        ("g.*", "h.{{Wildcard(1)}}"),
    ] {
        validate_mapping(src, dest).unwrap_or_else(|e| panic!("{src} -> {dest}: {e}"));
    }
}

#[test]
fn new_is_looser_than_account_mappings() {
    // Stream transforms take left/right and whitespace; empty tokens are a bad subject.
    SubjectTransform::new("a.*", "b.{{left(1,2)}}").unwrap();
    SubjectTransform::new("a.*", "b c.$1").unwrap();
    assert_eq!(
        SubjectTransform::new("a.*", "x..y").unwrap_err(),
        TransformError::BadSubject
    );
    assert_eq!(
        SubjectTransform::new("a..b", "x").unwrap_err(),
        TransformError::BadSubject
    );
    assert_eq!(
        SubjectTransform::new("a.*", "x.{{left(1)}}").unwrap_err().kind(),
        Some(DestErrorKind::NotEnoughArgs)
    );
}

#[test]
fn strict_import_errors() {
    // Observed from stream/service imports with `to` (`failed to create mapping transform
    // for stream import subject from "<from>" to "<to>": <text>`).
    for (src, dest, want) in [
        (
            "foo.*",
            "bar.{{partition(3,1)}}",
            "invalid mapping destination: the only mapping function allowed for import transforms is \
             {{Wildcard()}} in {{partition(3,1)}}",
        ),
        (
            "foo.*.*",
            "bar.$1",
            "invalid mapping destination: not using all of the token wildcard(s) in bar.$1",
        ),
        (
            "svc.*.*",
            "sv.{{wildcard(1)}}",
            "invalid mapping destination: not using all of the token wildcard(s) in sv.{{wildcard(1)}}",
        ),
    ] {
        assert_eq!(
            SubjectTransform::new_strict(src, dest).unwrap_err().to_string(),
            want,
            "{src} -> {dest}"
        );
    }
    // Accepted by the reference: references may repeat, literal sources are not checked.
    SubjectTransform::new_strict("s.*.*", "t.$2.$1").unwrap();
    SubjectTransform::new_strict("foo.*.*.*", "bar.$1.$1.$1").unwrap();
    SubjectTransform::new_strict("lit", "x.{{random(3)}}").unwrap();
    assert!(SubjectTransform::new_with_strict("a.*", "b.{{split(1,-)}}", false).is_ok());
    assert!(SubjectTransform::new_with_strict("a.*", "b.{{split(1,-)}}", true).is_err());
}

#[test]
fn reverse_of_import_transforms() {
    // Stream import `s.*.*` to `t.$2.$1`: a subscriber on t.x.y gets A's s.y.x (observed).
    let tr = SubjectTransform::new_strict("s.*.*", &tokenize("t.$2.$1")).unwrap();
    assert_eq!(tr.match_and_transform(b"s.y.x", &mut no_rand).unwrap(), b"t.x.y");
    let rev = tr.reverse().unwrap();
    assert_eq!((rev.source(), rev.destination()), ("t.*.*", "s.$2.$1"));
    assert_eq!(rev.match_and_transform(b"t.x.y", &mut no_rand).unwrap(), b"s.y.x");
    let tr = SubjectTransform::new_strict("f.*.>", "g.{{wildcard(1)}}.>").unwrap();
    let rev = tr.reverse().unwrap();
    assert_eq!((rev.source(), rev.destination()), ("g.*.>", "f.{{wildcard(1)}}.>"));
    assert_eq!(rev.transform_subject(b"g.k.>", &mut no_rand), b"f.k.>");
    // Observed: importing `s.*.*.*` to `t.$2.$3.$1`, a subscriber on t.b.c.a received
    // t.a.b.c (published as s.c.a.b) and not s.a.b.c: the reverse is not the inverse of a
    // rotation, as computed here.
    let tr = SubjectTransform::new_strict("s.*.*.*", "t.$2.$3.$1").unwrap();
    let rev = tr.reverse().unwrap();
    assert_eq!(rev.destination(), "s.$2.$3.$1");
    assert_eq!(rev.transform_subject(b"t.b.c.a", &mut no_rand), b"s.c.a.b");
    assert_eq!(tr.transform_subject(b"s.c.a.b", &mut no_rand), b"t.a.b.c");
    // Fewer references than source wildcards: no reverse.
    let tr = SubjectTransform::new("a.*.*", "b.$1").unwrap();
    assert_eq!(tr.reverse(), None);
}

#[test]
fn tokenize_untokenize() {
    assert_eq!(tokenize("foo.*.*"), "foo.$1.$2");
    assert_eq!(tokenize("foo.*x.>"), "foo.*x.>");
    assert_eq!(untokenize("bar"), ("bar".to_owned(), vec![]));
    assert_eq!(
        untokenize("foo.$2.$1"),
        ("foo.*.*".to_owned(), vec!["$2".to_owned(), "$1".to_owned()])
    );
    assert_eq!(
        untokenize("foo.{{wildcard(2)}}.{{wildcard(1)}}.$x"),
        (
            "foo.*.*.$x".to_owned(),
            vec!["{{wildcard(2)}}".to_owned(), "{{wildcard(1)}}".to_owned()]
        )
    );
}

#[test]
fn output_is_sized_once() {
    let tr = SubjectTransform::new("a.*.*", "{{sliceFromLeft(1,1)}}.{{split(2,)}}.$1.$1.{{partition(7)}}").unwrap();
    let out = tr.match_and_transform(b"a.abcdefgh.ijkl", &mut no_rand).unwrap();
    assert_eq!(&out[..out.len() - 2], b"a.b.c.d.e.f.g.h.i.j.k.l.abcdefgh.abcdefgh");
    assert!(out.capacity() >= out.len());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn token() -> impl Strategy<Value = String> {
        "[a-z0-9_-]{1,6}"
    }

    fn subject(min: usize, max: usize) -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(token(), min..=max)
    }

    proptest! {
        // foo.*.* -> foo.$1.$2 (and the tokenize form) gives back its input.
        #[test]
        fn identity(toks in subject(1, 5)) {
            let src = format!("foo.{}", vec!["*"; toks.len()].join("."));
            let subject = format!("foo.{}", toks.join("."));
            for tr in [SubjectTransform::new(&src, &tokenize(&src)).unwrap(), SubjectTransform::new(&src, "").unwrap()] {
                prop_assert_eq!(tr.match_and_transform(subject.as_bytes(), &mut no_rand), Some(subject.clone().into_bytes()));
            }
        }

        // A permutation of the wildcards lands each token where the references say, and the
        // reverse transform undoes it.
        #[test]
        fn permutation_and_reverse(toks in subject(1, 6), seed in any::<u64>()) {
            let n = toks.len();
            let mut order: Vec<usize> = (1..=n).collect();
            let mut s = seed;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                order.swap(i, (s >> 33) as usize % (i + 1));
            }
            let src = format!("in.{}", vec!["*"; n].join("."));
            let dest = format!("out.{}", order.iter().map(|i| format!("${i}")).collect::<Vec<_>>().join("."));
            let tr = SubjectTransform::new_strict(&src, &dest).unwrap();
            let subject = format!("in.{}", toks.join("."));
            let out = tr.match_and_transform(subject.as_bytes(), &mut no_rand).unwrap();
            let want = format!("out.{}", order.iter().map(|&i| toks[i - 1].as_str()).collect::<Vec<_>>().join("."));
            prop_assert_eq!(&out, want.as_bytes());
            // The reference's reverse gives the i-th source `*` the i-th reference of the
            // destination, which undoes the permutation only when it is its own inverse.
            let back = tr.reverse().unwrap().match_and_transform(&out, &mut no_rand).unwrap();
            let out_toks: Vec<&[u8]> = out.split(|&b| b == b'.').skip(1).collect();
            let want_back = format!("in.{}", order.iter().map(|&i| String::from_utf8_lossy(out_toks[i - 1])).collect::<Vec<_>>().join("."));
            prop_assert_eq!(&back, want_back.as_bytes());
            if order.iter().enumerate().all(|(k, &i)| order[i - 1] == k + 1) {
                prop_assert_eq!(back, subject.into_bytes());
            }
        }

        // `>` carries the tail over unchanged, after the prefix.
        #[test]
        fn tail(head in token(), rest in subject(1, 5)) {
            let tr = SubjectTransform::new(&format!("{head}.>"), "x.y.>").unwrap();
            let subject = format!("{head}.{}", rest.join("."));
            prop_assert_eq!(tr.match_and_transform(subject.as_bytes(), &mut no_rand), Some(format!("x.y.{}", rest.join(".")).into_bytes()));
            // A subject of another head does not match.
            let other = format!("{head}z.{}", rest.join("."));
            prop_assert_eq!(tr.match_and_transform(other.as_bytes(), &mut no_rand), None);
        }

        // Slicing and splitting keep the token's bytes in order, only adding separators.
        #[test]
        fn functions_keep_bytes(tok in "[a-z]{1,12}", n in 0i32..14) {
            for f in ["sliceFromLeft", "sliceFromRight", "splitFromLeft", "splitFromRight"] {
                let tr = SubjectTransform::new("a.*", &format!("{{{{{f}(1,{n})}}}}")).unwrap();
                let out = tr.match_and_transform(format!("a.{tok}").as_bytes(), &mut no_rand).unwrap();
                let kept: Vec<u8> = out.iter().copied().filter(|&b| b != b'.').collect();
                prop_assert_eq!(kept, tok.as_bytes().to_vec(), "{} {}", f, n);
                prop_assert!(!out.starts_with(b".") && !out.ends_with(b".") && !out.windows(2).any(|w| w == b".."));
            }
        }
    }
}
