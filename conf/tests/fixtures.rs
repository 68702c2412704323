//! Configuration examples from the NATS documentation (tests/fixtures/docs). Each must
//! parse to the tree the reference parser builds: the expected digests were computed by
//! nats-server's own `conf` package on the same files. Each must also print back to an
//! equal tree.

use std::path::PathBuf;

const DOCS: &[(&str, &str)] = &[
    (
        "full.conf",
        "sha256:4eb9da6e59ed8f0794f16cd8c8ea164b4bdbbdcc9b406ac745569ec1fbdc57d4",
    ),
    (
        "cluster.conf",
        "sha256:0ef1a4e164946075bfbad69656855b15b88a51c64a27e953e14f131228486153",
    ),
    (
        "cluster_tls.conf",
        "sha256:30444f55b70cf669a1582098a6fb8658f23fdefd8345746dcc4a18289485a368",
    ),
    (
        "subject_mapping.conf",
        "sha256:15495ed334bfbc85a0dd6f0292b66f2b58a133d3b4f868ba39822e885070eea7",
    ),
    (
        "gateway.conf",
        "sha256:ec636f5bdb2d34d5d6bd141fccc2509088fadd6b4bb9a27e4f1f8fe50449bceb",
    ),
    (
        "resource_limits.conf",
        "sha256:f5b06424f37fa5299cf7617bf38cbe921d7d6e6f1c476848ad9c9945553e3bfd",
    ),
    (
        "jetstream_leafnodes.conf",
        "sha256:e7c2427960118292dc5574a8fc84a0e2ab96acc70de97d8f677191b26ae1e053",
    ),
    (
        "leafnode.conf",
        "sha256:3630dd812251f622e8c303424daf177d9a2c6c7f32da0ef29de2344e205ede7c",
    ),
    (
        "mqtt.conf",
        "sha256:e8fa8b7b85810ab1fbba971e71974c0b9872e1df3ee981adbbcfcbfc6d595d8a",
    ),
    (
        "accounts.conf",
        "sha256:33cc6114c3c59a78e4eb4f3cf820e8c354a30c1f0b6450a984b663d38ce65237",
    ),
    (
        "authorization.conf",
        "sha256:53c264b3ad0bdce9dfa8245cd1ae3cd722ff3fb5feefef4bfd5af553d3165b36",
    ),
    (
        "jwt_nkey_auth.conf",
        "sha256:b673f15c0fbdb081f68a8a05a1d485667c5736f0c209f7a4a2257b38f29096d5",
    ),
    (
        "websocket.conf",
        "sha256:1791d3ecff46499024e1eb109232f19dcfc537e15a33690cb4ef255f57be5be7",
    ),
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/docs")
        .join(name)
}

#[test]
fn docs_examples_parse_like_the_reference() {
    for (name, digest) in DOCS {
        let map = conf::parse_file(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(conf::config_digest(&map), *digest, "{name}");
    }
}

#[test]
fn docs_examples_print_back() {
    for (name, digest) in DOCS {
        let map = conf::parse_file(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = conf::to_config_string(&map).expect("printable");
        let again = conf::parse(&printed).unwrap_or_else(|e| panic!("{name} printed:\n{printed}\n{e}"));
        assert_eq!(again, map, "{name}");
        assert_eq!(conf::config_digest(&again), *digest, "{name}");
    }
}

#[test]
fn lookups_on_a_real_config() {
    let map = conf::parse_file(fixture("full.conf")).expect("parse");
    let (key, entry) = map.get_ignore_case("PORT").expect("port");
    assert_eq!(key, "port");
    assert_eq!(entry.value.as_i64(), Some(4222));
    assert_eq!(entry.key_pos.line, 3);
    assert!(
        entry.key_pos.to_string().ends_with("full.conf:3:1"),
        "{}",
        entry.key_pos
    );
    let js = map
        .value_ignore_case("JetStream")
        .and_then(|v| v.as_map())
        .expect("jetstream");
    assert_eq!(js.get("store_dir").and_then(|v| v.as_str()), Some("nats"));
    assert_eq!(js.get("store_dir").map(|v| v.go_type_name()), Some("string"));
}
