//! Tests of weighted account mappings. "Observed" values come from the reference
//! nats-server 2.14.0 (`nats-server -t` for errors; for distributions, 2000 publishes to a
//! running server with a `>` subscriber, the counts given in the comments).

use super::*;
use std::collections::BTreeMap;

/// A draw whose weight roll (`Uint32n(100)` of the high half) is exactly `w`.
fn draw(w: u8) -> u64 {
    let high = (u64::from(w) << 32).div_ceil(100);
    high << 32 | 0x1234_5678
}

/// Outputs of `apply` over the 100 possible weight rolls.
fn spread(set: &MappingSet, subject: &str, cluster: Option<&str>) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for w in 0..100 {
        let mapped = set
            .apply(subject.as_bytes(), draw(w), cluster)
            .expect("a mapping applies");
        let name = if mapped.is_empty() {
            "(dropped)".to_owned()
        } else {
            String::from_utf8(mapped).unwrap()
        };
        *out.entry(name).or_insert(0) += 1;
    }
    out
}

fn set(entries: &[(&str, &[MapDest])]) -> MappingSet {
    let mut s = MappingSet::new();
    for (src, dests) in entries {
        s.add(src, dests).unwrap_or_else(|e| panic!("{src}: {e}"));
    }
    s
}

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[test]
fn draw_rolls_as_intended() {
    for w in 0..100u8 {
        assert_eq!((((draw(w) >> 32) * 100) >> 32) as u8, w);
    }
}

#[test]
fn weighted_distributions() {
    let s = set(&[
        // Observed: A 411, B 556, w1 1033 of 2000.
        ("w1", &[MapDest::new("A", 20), MapDest::new("B", 30)]),
        // Observed: w2 626, B 394, 980 lost: listing the source means the rest is dropped.
        ("w2", &[MapDest::new("w2", 30), MapDest::new("B", 20)]),
        // Observed without a cluster: B 801, w3 1199; in cluster c1: A 1172, w3 828.
        ("w3", &[MapDest::in_cluster("A", 60, "c1"), MapDest::new("B", 40)]),
        // Observed: w4 500 of 500 (only cluster-scoped destinations).
        ("w4", &[MapDest::in_cluster("A", 60, "c1")]),
        // Observed: w5.z 100 of 100.
        ("w5.*", &[MapDest::new("A.$1", 0)]),
        // Observed: w6 10 of 10.
        ("w6", &[MapDest::new("w6", 100)]),
        // Observed in cluster c1: B 778, w7 1222 (c2 does not apply).
        ("w7", &[MapDest::in_cluster("A", 30, "c2"), MapDest::new("B", 40)]),
        // Observed in cluster c1: w8 619, 1381 lost.
        ("w8", &[MapDest::in_cluster("w8", 30, "c1"), MapDest::new("B", 40)]),
    ]);
    assert_eq!(spread(&s, "w1", None), counts(&[("A", 20), ("B", 30), ("w1", 50)]));
    assert_eq!(
        spread(&s, "w2", None),
        counts(&[("w2", 30), ("B", 20), ("(dropped)", 50)])
    );
    assert_eq!(spread(&s, "w3", None), counts(&[("B", 40), ("w3", 60)]));
    assert_eq!(spread(&s, "w3", Some("c1")), counts(&[("A", 60), ("w3", 40)]));
    assert_eq!(spread(&s, "w3", Some("c9")), counts(&[("B", 40), ("w3", 60)]));
    assert_eq!(spread(&s, "w4", None), counts(&[("w4", 100)]));
    assert_eq!(spread(&s, "w5.z", None), counts(&[("w5.z", 100)]));
    assert_eq!(spread(&s, "w6", None), counts(&[("w6", 100)]));
    assert_eq!(spread(&s, "w7", Some("c1")), counts(&[("B", 40), ("w7", 60)]));
    assert_eq!(spread(&s, "w8", Some("c1")), counts(&[("w8", 30), ("(dropped)", 70)]));
    assert_eq!(spread(&s, "w8", None), counts(&[("B", 40), ("(dropped)", 60)]));
    assert_eq!(s.apply(b"other", 0, None), None);
}

#[test]
fn observed_weighted_errors() {
    // Observed: `Error adding mapping for "<src>" : <text>`.
    for (src, dests, want) in [
        (
            "w1",
            vec![MapDest::new("A", 60), MapDest::new("B", 50)],
            "total weight needs to be <= 100",
        ),
        (
            "w2",
            vec![MapDest::new("A", 30), MapDest::new("A", 20)],
            r#"duplicate entry for "A""#,
        ),
        (
            "w4",
            vec![MapDest::in_cluster("A", 60, "c1"), MapDest::in_cluster("B", 50, "c1")],
            "total weight needs to be <= 100",
        ),
        (
            "w6",
            vec![MapDest::new("x.{{wildcard(1)}}", 10)],
            "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}",
        ),
        (
            "w7.*",
            vec![MapDest::new("x.$1", 10), MapDest::new("y.{{left(1,1)}}", 10)],
            "invalid mapping destination: unknown function in {{left(1,1)}}",
        ),
        // Not reachable from a config (it refuses weights over 100 itself), but from JWTs.
        (
            "w9",
            vec![MapDest::new("A", 101)],
            "individual weights need to be <= 100",
        ),
        ("w..9", vec![MapDest::new("A", 10)], "invalid subject"),
        // The same subject in two clusters is still a duplicate.
        (
            "w10",
            vec![MapDest::in_cluster("A", 10, "c1"), MapDest::in_cluster("A", 10, "c2")],
            r#"duplicate entry for "A""#,
        ),
    ] {
        assert_eq!(Mapping::new(src, &dests).unwrap_err().to_string(), want, "{src}");
    }
    // Observed as accepted: 60% in each of two clusters and 60% without one; a 0% weight.
    Mapping::new(
        "w3",
        &[
            MapDest::in_cluster("A", 60, "c1"),
            MapDest::in_cluster("B", 60, "c2"),
            MapDest::new("C", 60),
        ],
    )
    .unwrap();
    Mapping::new("w5", &[MapDest::new("A", 0)]).unwrap();
    // An empty cluster name is no cluster.
    assert_eq!(
        Mapping::new("w11", &[MapDest::in_cluster("A", 60, ""), MapDest::new("B", 60)]).unwrap_err(),
        MappingError::TotalWeightOver100
    );
}

#[test]
fn first_matching_mapping_wins() {
    // Observed: with `foo.bar` listed before `foo.*`, foo.bar -> LIT; with `foo.*` first,
    // foo.bar -> WC.bar (the reference's list order is its config map's iteration order,
    // which is usually the file order; `foo.>` first gave FWC.bar).
    let lit_first = set(&[
        ("foo.bar", &[MapDest::new("LIT", 100)]),
        ("foo.*", &[MapDest::new("WC.$1", 100)]),
    ]);
    assert_eq!(lit_first.apply(b"foo.bar", 0, None).unwrap(), b"LIT");
    assert_eq!(lit_first.apply(b"foo.baz", 0, None).unwrap(), b"WC.baz");
    let wc_first = set(&[
        ("foo.*", &[MapDest::new("WC.$1", 100)]),
        ("foo.bar", &[MapDest::new("LIT", 100)]),
    ]);
    assert_eq!(wc_first.apply(b"foo.bar", 0, None).unwrap(), b"WC.bar");
    let fwc_first = set(&[
        ("foo.>", &[MapDest::new("FWC.>", 100)]),
        ("foo.*", &[MapDest::new("WC.$1", 100)]),
        ("foo.bar", &[MapDest::new("LIT", 100)]),
    ]);
    assert_eq!(fwc_first.apply(b"foo.bar", 0, None).unwrap(), b"FWC.bar");
}

#[test]
fn replace_keeps_rank_and_remove_swaps_last() {
    let mut s = set(&[
        ("foo.*", &[MapDest::new("A.$1", 100)]),
        ("foo.bar", &[MapDest::new("B", 100)]),
        ("foo.>", &[MapDest::new("C.>", 100)]),
    ]);
    s.add("foo.*", &[MapDest::new("A2.$1", 100)]).unwrap();
    assert_eq!(s.apply(b"foo.bar", 0, None).unwrap(), b"A2.bar");
    assert!(s.remove("foo.*"));
    assert!(!s.remove("foo.*"));
    // `foo.>` took the first place.
    assert_eq!(s.iter().map(Mapping::source).collect::<Vec<_>>(), ["foo.>", "foo.bar"]);
    assert_eq!(s.apply(b"foo.bar", 0, None).unwrap(), b"C.bar");
    assert_eq!(s.len(), 2);
}

#[test]
fn literal_partition_hashes_nothing_unless_tokenized() {
    // Observed: `lit: "L.{{partition(10)}}"` alone (or listed first) maps lit -> L.1 (FNV-1a
    // of the empty string, 2166136261 % 10); listed after `w.*` it maps lit -> L.0.
    let alone = set(&[("lit", &[MapDest::new("L.{{partition(10)}}", 100)])]);
    assert_eq!(alone.apply(b"lit", 0, None).unwrap(), b"L.1");
    let after = set(&[
        ("w.*", &[MapDest::new("W.$1", 100)]),
        ("lit", &[MapDest::new("L.{{partition(10)}}", 100)]),
    ]);
    assert_eq!(after.apply(b"lit", 0, None).unwrap(), b"L.0");
    // A standalone transform always has the tokens.
    let tr = SubjectTransform::new("lit", "L.{{partition(10)}}").unwrap();
    assert_eq!(tr.match_and_transform(b"lit", &mut || 0).unwrap(), b"L.0");
}

#[test]
fn subset_match_quirks() {
    // Observed: `a.*x` maps a.zz and a.*x; `c.*y.*` maps c.k.m and c.*y.m but not c.*.m.
    let s = set(&[
        ("a.*x", &[MapDest::new("B", 100)]),
        ("c.*y.*", &[MapDest::new("D.$1", 100)]),
    ]);
    for (subject, want) in [
        ("a.zz", Some("B")),
        ("a.*x", Some("B")),
        ("a.q.r", None),
        ("c.k.m", Some("D.m")),
        ("c.*y.m", Some("D.m")),
        ("c.*.m", None),
    ] {
        assert_eq!(
            s.apply(subject.as_bytes(), 0, None),
            want.map(|w| w.as_bytes().to_vec()),
            "{subject}"
        );
    }
    // No validity check on the published subject: an empty tail token still matches `>`.
    let s = set(&[("foo.>", &[MapDest::new("bar.>", 100)])]);
    assert_eq!(s.apply(b"foo.", 0, None).unwrap(), b"bar.");
    assert_eq!(s.apply(b"foo", 0, None), None);
}

#[test]
fn empty_destination_maps_to_itself() {
    // The reference accepts `w9: ""` at config time and crashes on the first publish to w9;
    // here the empty destination is the identity.
    let s = set(&[("w9", &[MapDest::new("", 100)]), ("v.*", &[MapDest::new("", 100)])]);
    assert_eq!(s.apply(b"w9", 0, None).unwrap(), b"w9");
    assert_eq!(s.apply(b"v.a", 0, None).unwrap(), b"v.a");
}

#[test]
fn random_in_a_mapping() {
    let s = set(&[("r.*", &[MapDest::new("R.{{random(5)}}", 100)])]);
    let mut seen = BTreeMap::new();
    for i in 0..500u64 {
        let out = s.apply(b"r.a", i.wrapping_mul(0x9e37_79b9_7f4a_7c15), None).unwrap();
        *seen.entry(String::from_utf8(out).unwrap()).or_insert(0) += 1;
    }
    // Observed: R.0 .. R.4 about equally (45, 48, 28, 34, 45 of 200).
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        ["R.0", "R.1", "R.2", "R.3", "R.4"]
    );
    assert!(seen.values().all(|&c| c > 50), "{seen:?}");
}
