//! Property tests: printing a tree and parsing the text gives the same tree; parsing any
//! input never panics; whatever parses prints back to an equal tree.

use conf::{to_config_string, DateTime, Map, Parser, Position, Value, ValueKind};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z_][a-zA-Z0-9_.-]{0,10}",
        1 => "include|INCLUDE|Include|true|1|-1|\\}|\\{|#x|//x|a b|\\$x|=|:",
        // Anything the quoted forms can hold: no NUL and not both kinds of quote.
        2 => any::<String>().prop_filter("printable key", |k| printable_key(k)),
    ]
}

fn printable_key(k: &str) -> bool {
    let both_quotes = k.contains('"') && k.contains('\'');
    !k.contains('\0') && !both_quotes
}

fn datetime() -> impl Strategy<Value = DateTime> {
    (0u16..=9999, 1u8..=12, 1u8..=28, 0u8..24, 0u8..60, 0u8..60)
        .prop_map(|(y, mo, d, h, mi, s)| DateTime::new(y, mo, d, h, mi, s).expect("valid date"))
}

fn scalar() -> impl Strategy<Value = ValueKind> {
    prop_oneof![
        any::<String>().prop_map(ValueKind::String),
        "[ -~]{0,12}".prop_map(ValueKind::String),
        "true|false|yes|no|on|off|1k|2MB|-1|1.5|127.0.0.1:4222|\\$var|2016-05-04T18:53:41Z|\\(x\\)|include x"
            .prop_map(ValueKind::String),
        any::<i64>().prop_map(ValueKind::Integer),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(ValueKind::Float),
        (-1000i32..1000, 0u32..4).prop_map(|(m, e)| ValueKind::Float(f64::from(m) / 10f64.powi(e as i32))),
        any::<bool>().prop_map(ValueKind::Bool),
        datetime().prop_map(ValueKind::DateTime),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = scalar().prop_map(|k| Value::new(k, Position::default()));
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6)
                .prop_map(|a| Value::new(ValueKind::Array(a), Position::default())),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|entries| Value::new(ValueKind::Map(to_map(entries)), Position::default())),
        ]
    })
}

fn to_map(entries: Vec<(String, Value)>) -> Map {
    let mut map = Map::new();
    for (k, v) in entries {
        map.insert(k, Position::default(), v);
    }
    map
}

fn document() -> impl Strategy<Value = Map> {
    prop::collection::vec((key(), value()), 0..8).prop_map(to_map)
}

fn parser() -> Parser {
    // No environment: printed text never refers to variables anyway.
    Parser::new().with_env(|_| None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn print_then_parse_is_identity(doc in document()) {
        let text = to_config_string(&doc).expect("printable");
        let parsed = parser().parse_str(&text);
        prop_assert!(parsed.is_ok(), "text:\n{}\nerror: {:?}", text, parsed.err());
        let parsed = parsed.expect("checked");
        prop_assert_eq!(&parsed, &doc, "text:\n{}", text);
        // And printing is stable.
        prop_assert_eq!(to_config_string(&parsed).expect("printable"), text);
    }

    #[test]
    fn parsing_bytes_never_panics(data in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parser().parse_bytes(&data, None);
    }

    #[test]
    fn whatever_parses_prints_back(parts in prop::collection::vec(fragment(), 0..24)) {
        let text: String = parts.concat();
        if let Ok(tree) = parser().parse_str(&text) {
            if let Ok(printed) = to_config_string(&tree) {
                let again = parser().parse_str(&printed);
                prop_assert!(again.is_ok(), "input {:?}\nprinted:\n{}\nerror: {:?}", text, printed, again.err());
                prop_assert_eq!(again.expect("checked"), tree, "input {:?}\nprinted:\n{}", text, printed);
            }
        }
    }
}

/// Pieces of config syntax, valid and not, for the parse-print-parse property.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a",
        "b",
        "key",
        "'q k'",
        "\"d k\"",
        "}",
        "{",
        "[",
        "]",
        "(",
        ")",
        ",",
        ";",
        " = ",
        "=",
        ":",
        " ",
        "\t",
        "\n",
        "\r\n",
        "#c\n",
        "// c\n",
        "/",
        "1",
        "-1",
        "007",
        "1k",
        "2MB",
        "3GiB",
        "8eb",
        "1kbb",
        "1.5",
        "-0.25",
        "1.2.3",
        "127.0.0.1:4222",
        "2016-05-04T18:53:41Z",
        "true",
        "Off",
        "yes",
        "\"s\"",
        "'s'",
        "\"e\\t\\x41\\\\\"",
        "bare\\x41",
        "$a",
        "$b",
        "$2a$11$x",
        "(\nraw\n)\n",
        "include x",
        "\0",
        "é",
        "{}",
        "[]",
        "x=[1,2,]",
        "m { k = v }",
        "a,b",
    ])
}

#[test]
fn printer_output_is_readable() {
    let text = "server_name: n1\nport: 4222\njetstream { max_mem: 1G, store_dir: \"/data\" }\n\
                accounts { A { users = [ {user: a, password: \"p w\"} ] } }\nlist = [1, 2.5, true, 2016-05-04T18:53:41Z,]\n";
    let tree = conf::parse(text).expect("parse");
    let printed = to_config_string(&tree).expect("print");
    assert_eq!(
        printed,
        "server_name = \"n1\"\nport = 4222\njetstream {\n  max_mem = 1000000000\n  store_dir = \"/data\"\n}\n\
         accounts {\n  A {\n    users [\n      {\n        user = \"a\"\n        password = \"p w\"\n      }\n    ]\n  }\n}\n\
         list [\n  1\n  2.5\n  true\n  2016-05-04T18:53:41Z\n]\n"
    );
}

#[test]
fn unprintable_trees_are_errors() {
    let mut map = Map::new();
    map.insert(
        "a\0b",
        Position::default(),
        Value::new(ValueKind::Integer(1), Position::default()),
    );
    assert!(matches!(to_config_string(&map), Err(conf::PrintError::Key(_))));
    let mut map = Map::new();
    map.insert(
        "a",
        Position::default(),
        Value::new(ValueKind::Float(f64::NAN), Position::default()),
    );
    assert!(matches!(to_config_string(&map), Err(conf::PrintError::NonFinite(_))));
}
