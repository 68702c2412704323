//! Parses arbitrary bytes as a config. Invariants: no panic, no unbounded work; a tree
//! that parses prints (when it has a spelling) and parses back to an equal tree; the
//! Go-duration parser never panics on the same bytes.
#![no_main]

use conf::{Limits, Parser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A small, fixed environment so `$VAR` paths run deterministically; includes resolve
    // against the current directory and almost always fail to open, which is fine.
    let parser = Parser::new()
        .with_limits(Limits {
            max_expansion: 1 << 20,
            ..Limits::default()
        })
        .with_env(|name| match name {
            "N" => Some("22".to_string()),
            "M" => Some("{a = 1, b = [x, 2,]}".to_string()),
            "L" => Some("$N".to_string()),
            "C" => Some("$C".to_string()),
            _ => None,
        });
    if let Ok(tree) = parser.parse_bytes(data, None) {
        if let Ok(text) = conf::to_config_string(&tree) {
            let again = parser
                .parse_str(&text)
                .unwrap_or_else(|e| panic!("printed tree does not parse: {e}\n{text}"));
            assert_eq!(again, tree, "printed tree parses differently:\n{text}");
        }
        let _ = conf::config_digest(&tree);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = conf::parse_duration_nanos(s);
    }
});
