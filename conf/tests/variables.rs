//! `$variables`: block scoping, the environment (whose values are parsed as values),
//! bcrypt literals, positions and the used-as-variable flag.

mod common;

use common::{parser_with_env, show};

fn parse_env(text: &str, env: &[(&str, &str)]) -> String {
    match parser_with_env(env).parse_str(text) {
        Ok(m) => show(&m),
        Err(e) => format!("error: {}", e.reference_text()),
    }
}

#[test]
fn environment_values_are_parsed_as_values() {
    let env = [
        ("INT", "22"),
        ("STR", "xyz"),
        ("NUM_STR", "3xyz"),
        ("SIZE_STR", "3Gyz"),
        ("QUOTED", "'3xyz'"),
        ("SIZE", "1MB"),
        ("MAP", "{a = 1, b = [x, 2,]}"),
        ("LIST", "[1, two]"),
        ("BOOL", "on"),
        ("EMPTY", ""),
        ("CHAIN", "$INT"),
        ("BCRYPT", "$2a$11$abc"),
        ("FLOAT", "2.5"),
    ];
    for (text, want) in [
        ("foo = $INT", "{foo: 22}"),
        ("foo = $STR", r#"{foo: "xyz"}"#),
        ("foo = $NUM_STR", r#"{foo: "3xyz"}"#),
        ("foo = $SIZE_STR", r#"{foo: "3Gyz"}"#),
        ("foo = $QUOTED", r#"{foo: "3xyz"}"#),
        ("foo = $SIZE", "{foo: 1048576}"),
        ("foo = $MAP", r#"{foo: {a: 1, b: ["x", 2]}}"#),
        ("foo = $LIST", r#"{foo: [1, "two"]}"#),
        ("foo = $BOOL", "{foo: true}"),
        ("foo = $EMPTY", r#"{foo: ""}"#),
        ("foo = $CHAIN", "{foo: 22}"),
        ("foo = $BCRYPT", r#"{foo: "$2a$11$abc"}"#),
        ("foo = $FLOAT", "{foo: 2.5f}"),
        ("foo = [$INT, $STR]", r#"{foo: [22, "xyz"]}"#),
        // Keys shadow the environment.
        ("INT = 5\nfoo = $INT", "{INT: 5, foo: 5}"),
        (
            "foo = $MISSING",
            "error: variable reference for 'MISSING' on line 1 can not be found",
        ),
        ("foo = $", "error: variable reference for '' on line 1 can not be found"),
    ] {
        assert_eq!(parse_env(text, &env), want, "{text}");
    }
}

#[test]
fn the_same_environment_variable_may_be_used_twice() {
    let env = [("A", "$B"), ("B", "1")];
    assert_eq!(
        parse_env("x = $A\ny = $A\nz = [$A, $B]", &env),
        "{x: 1, y: 1, z: [1, 1]}"
    );
}

#[test]
fn bcrypt_only_for_2a() {
    assert_eq!(parse_env("p = $2a$10$xyz", &[]), r#"{p: "$2a$10$xyz"}"#);
    assert_eq!(
        parse_env("p = $2b$10$xyz", &[]),
        "error: variable reference for '2b$10$xyz' on line 1 can not be found"
    );
}

#[test]
fn scoping() {
    let text = "a = 1\nm {\n  a = 2\n  n {\n    b = $a\n  }\n  c = $a\n}\nd = $a\nl = [ { a = 3 }, { e = $a } ]\n";
    assert_eq!(
        parse_env(text, &[]),
        "{a: 1, m: {a: 2, n: {b: 2}, c: 2}, d: 1, l: [{a: 3}, {e: 1}]}"
    );
    // A key is not in scope in its own value.
    assert_eq!(
        parse_env("a { b = $a }", &[]),
        "error: variable reference for 'a' on line 1 can not be found"
    );
    // Later definitions win.
    assert_eq!(parse_env("a = 1\na = 2\nb = $a", &[]), "{a: 2, b: 2}");
}

#[test]
fn used_as_variable_flags_and_positions() {
    let map = parser_with_env(&[("E", "{x = 1}")])
        .parse_str("index = 22\nfoo = $index\nunused = 1\nnest { inner = 3; v = $inner }\nenv = $E\n")
        .expect("parse");
    let used: Vec<(&str, bool)> = map.iter().map(|(k, e)| (k, e.value.used_as_variable)).collect();
    assert_eq!(
        used,
        vec![
            ("index", true),
            ("foo", false),
            ("unused", false),
            ("nest", false),
            ("env", false)
        ]
    );
    let nest = map.get("nest").and_then(|v| v.as_map()).expect("nest");
    assert!(nest.get("inner").is_some_and(|v| v.used_as_variable));

    // A value copied from a variable sits where the reference was written.
    let foo = map.get("foo").expect("foo");
    assert_eq!((foo.pos.line, foo.pos.column), (2, 7));
    // ... and so does everything inside a value parsed from the environment.
    let env = map.get("env").and_then(|v| v.as_map()).expect("env");
    let x = env.get_entry("x").expect("x");
    assert_eq!((x.key_pos.line, x.key_pos.column), (5, 7));
    assert_eq!((x.value.pos.line, x.value.pos.column), (5, 7));
}

#[test]
fn process_environment_is_the_default() {
    // PATH is set in any test environment; HOME may not be.
    let Ok(path) = std::env::var("PATH") else { return };
    let map = conf::parse("p = \"$PATH\"\nq = 1").expect("parse");
    assert_eq!(map.get("p").and_then(|v| v.as_str()), Some("$PATH"));
    if !path.contains([' ', '\t', ',', ';', '}', ']', '#', '\n']) && !path.starts_with(|c: char| c.is_ascii_digit()) {
        let map = conf::parse("p = $PATH").expect("parse");
        assert_eq!(map.get("p").and_then(|v| v.as_str()), Some(path.as_str()));
    }
}
