//! Every error path: the `file:line:column: message` Display, and `reference_text`, which
//! must equal what `nats-server -t` prints for the same file (checked against 2.14.0).

mod common;

use std::fs;
use std::path::Path;

use common::{parser_with_env, CwdGuard};
use conf::{ErrorKind, Limits, Parser};

/// Writes `text` to `dir/name` and parses it with `parser`, expecting an error.
fn parse_err_with(parser: &Parser, dir: &Path, name: &str, text: &str) -> conf::Error {
    let path = dir.join(name);
    fs::write(&path, text).expect("write");
    // Parse by a relative name so messages read like `t.conf:1:2: ...`.
    let _cwd = CwdGuard::enter(dir);
    parser.parse_file(name).expect_err("expected an error")
}

fn parse_err(text: &str) -> conf::Error {
    let dir = tempfile::tempdir().expect("tempdir");
    parse_err_with(&parser_with_env(&[]), dir.path(), "t.conf", text)
}

#[track_caller]
fn check(text: &str, display: &str, reference: &str) {
    let err = parse_err(text);
    assert_eq!(err.to_string(), display, "Display for {text:?}");
    assert_eq!(err.reference_text(), reference, "reference_text for {text:?}");
}

#[test]
fn syntax_errors_carry_positions() {
    check(
        "port = 4222\nlisten: \"abc\n",
        "t.conf:3:1: Unexpected EOF.",
        "Parse error on line 3: 'Unexpected EOF.'",
    );
    check(
        "a = .2",
        "t.conf:1:5: Floats must start with a digit",
        "Parse error on line 1: 'Floats must start with a digit'",
    );
    check(
        "a = 1\nb = 1.x",
        "t.conf:2:8: Floats must have a digit after the '.', but got 'x' instead.",
        "Parse error on line 2: 'Floats must have a digit after the '.', but got 'x' instead.'",
    );
    check(
        "port = 1.5.x",
        "t.conf:1:12: Expected a top-level value to end with a new line, comment or EOF, but got 'x' instead.",
        "Parse error on line 1: 'Expected a top-level value to end with a new line, comment or EOF, but got 'x' instead.'",
    );
    // The reference counts the line after the offending newline.
    check(
        "a =\nb = 2",
        "t.conf:2:1: Expected value but found new line",
        "Parse error on line 2: 'Expected value but found new line'",
    );
    check(
        "authorization { users = [1] }",
        "t.conf:1:29: Expected an array value terminator \",\" or an array terminator \"]\", but got '}' instead.",
        "Parse error on line 1: 'Expected an array value terminator \",\" or an array terminator \"]\", but got '}' instead.'",
    );
    // End of input shows as NUL, as in the reference.
    check(
        "a { b = 1",
        "t.conf:1:9: Expected a map value terminator \",\" or a map terminator \"}\", but got '\0' instead.",
        "Parse error on line 1: 'Expected a map value terminator \",\" or a map terminator \"}\", but got '\0' instead.'",
    );
    check(
        "x = \"\\q\"",
        "t.conf:1:7: Invalid escape character 'q'. Only the following escape characters are allowed: \\xXX, \\t, \\n, \\r, \\\", \\\\.",
        "Parse error on line 1: 'Invalid escape character 'q'. Only the following escape characters are allowed: \\xXX, \\t, \\n, \\r, \\\", \\\\.'",
    );
    check(
        "quote = (\n  foo\n",
        "t.conf:3:1: Unexpected EOF processing block.",
        "Parse error on line 3: 'Unexpected EOF processing block.'",
    );
}

#[test]
fn key_without_value() {
    check(
        "aaaa",
        "t.conf:1:4: config is invalid",
        "config is invalid (t.conf:1:4)",
    );
    check(
        "a { b = 1 }\n  c",
        "t.conf:2:4: config is invalid",
        "config is invalid (t.conf:2:4)",
    );
    check(
        "\n   # with comments and no spaces to create key values\n   a,a,a\n      ",
        "t.conf:4:7: config is invalid",
        "config is invalid (t.conf:4:7)",
    );
    // Strings have no file name in the message, as in the reference.
    let err = Parser::new()
        .parse_str("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
        .expect_err("invalid");
    assert_eq!(err.reference_text(), "config is invalid (:1:41)");
    assert_eq!(err.kind(), &ErrorKind::MissingValue);
}

#[test]
fn value_errors() {
    check(
        "a = 1\nb = 99999999999999999999",
        "t.conf:2:5: integer '99999999999999999999' is out of the range",
        "integer '99999999999999999999' is out of the range",
    );
    check(
        "b = -99999999999999999999k",
        "t.conf:1:4: integer '-99999999999999999999k' is out of the range",
        "integer '-99999999999999999999k' is out of the range",
    );
    let big = format!("{}.0", "1".repeat(400));
    let err = parse_err(&format!("a = 1\nb = {big}"));
    assert_eq!(err.reference_text(), format!("float '{big}' is out of the range"));
    assert_eq!(err.position().map(|p| (p.line, p.column)), Some((2, 5)));
    check(
        "a = 1\nd = 2016-13-04T18:53:41Z",
        "t.conf:2:5: expected Zulu formatted DateTime, but got '2016-13-04T18:53:41Z'",
        "expected Zulu formatted DateTime, but got '2016-13-04T18:53:41Z'",
    );
    check(
        "d = 2023-02-29T00:00:00Z",
        "t.conf:1:4: expected Zulu formatted DateTime, but got '2023-02-29T00:00:00Z'",
        "expected Zulu formatted DateTime, but got '2023-02-29T00:00:00Z'",
    );
}

#[test]
fn variable_errors() {
    check(
        "\n\n  a = $nope",
        "t.conf:3:7: variable reference for 'nope' can not be found",
        "variable reference for 'nope' on line 3 can not be found",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let p = parser_with_env(&[("FOO", "{"), ("CA", "$CB"), ("CB", "$CA"), ("SP", "a b")]);
    let err = parse_err_with(&p, dir.path(), "t.conf", "a = $FOO\n");
    assert_eq!(
        err.reference_text(),
        "variable reference for 'FOO' on line 1 could not be parsed: Parse error on line 1: 'Unexpected EOF processing map.'"
    );
    assert_eq!(
        err.to_string(),
        "t.conf:1:4: variable reference for 'FOO' could not be parsed: :1:4: Unexpected EOF processing map."
    );
    let err = parse_err_with(&p, dir.path(), "t.conf", "a = $CA\n");
    assert_eq!(
        err.reference_text(),
        "variable reference for 'CA' on line 1 could not be parsed: variable reference for 'CB' on line 1 could not be \
         parsed: variable reference for 'CA' on line 1 could not be parsed: variable reference cycle for 'CA'"
    );
    let err = parse_err_with(&p, dir.path(), "t.conf", "a = $SP\n");
    assert_eq!(
        err.reference_text(),
        "variable reference for 'SP' on line 1 could not be parsed: Parse error on line 1: 'Expected a top-level value \
         to end with a new line, comment or EOF, but got 'b' instead.'"
    );
}

#[test]
fn include_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = parser_with_env(&[]);
    fs::write(dir.path().join("bad.conf"), "x = [\n").expect("write");
    let err = parse_err_with(&p, dir.path(), "t.conf", "a = 1\ninclude bad.conf\n");
    assert_eq!(
        err.reference_text(),
        "error parsing include file 'bad.conf', Parse error on line 2: 'Expected an array value terminator \",\" or an \
         array terminator \"]\", but got '\0' instead.'"
    );
    assert!(
        err.to_string()
            .starts_with("t.conf:2:9: error parsing include file 'bad.conf', bad.conf:2:1: Expected"),
        "{err}"
    );

    fs::write(dir.path().join("nokey.conf"), "x = 1\n  y").expect("write");
    let err = parse_err_with(&p, dir.path(), "t.conf", "include nokey.conf\n");
    assert_eq!(
        err.reference_text(),
        "error parsing include file 'nokey.conf', config is invalid (nokey.conf:2:4)"
    );

    let err = parse_err_with(&p, dir.path(), "t.conf", "m {\n  include 'missing.conf'\n}\n");
    assert_eq!(
        err.reference_text(),
        "error parsing include file 'missing.conf', open missing.conf: no such file or directory"
    );
    assert_eq!(
        err.to_string(),
        "t.conf:2:12: error parsing include file 'missing.conf', open missing.conf: no such file or directory"
    );

    // Absolute include paths are joined to the including file's directory, as in Go.
    let err = parse_err_with(&p, dir.path(), "t.conf", "include /etc/x.conf\n");
    assert_eq!(
        err.reference_text(),
        "error parsing include file '/etc/x.conf', open etc/x.conf: no such file or directory"
    );

    // Including a directory.
    fs::create_dir(dir.path().join("sub")).expect("mkdir");
    let err = parse_err_with(&p, dir.path(), "t.conf", "include sub\n");
    assert_eq!(
        err.reference_text(),
        "error parsing include file 'sub', read sub: is a directory"
    );
}

#[test]
fn missing_file() {
    let err = conf::parse_file("/nonexistent/dir/nope.conf").expect_err("missing");
    assert_eq!(
        err.to_string(),
        "open /nonexistent/dir/nope.conf: no such file or directory"
    );
    assert_eq!(err.reference_text(), err.to_string());
    assert!(err.position().is_none());
}

#[test]
fn limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = Limits {
        max_depth: 4,
        max_include_depth: 2,
        max_env_depth: 2,
        max_expansion: 4096,
        max_file_size: 64,
        ..Limits::default()
    };
    let p = Parser::new().with_limits(small.clone()).with_env(|name| match name {
        "E1" => Some("$E2".to_string()),
        "E2" => Some("$E3".to_string()),
        "E3" => Some("1".to_string()),
        _ => None,
    });

    let err = parse_err_with(&p, dir.path(), "t.conf", "a { b { c { d { e { f = 1 } } } } }");
    assert_eq!(err.to_string(), "t.conf:1:18: exceeded the maximum nesting depth of 4");
    let err = parse_err_with(&p, dir.path(), "t.conf", "a [[[[[1]]]]]");
    assert_eq!(err.kind(), &ErrorKind::TooDeep(4));
    // Braces around the whole config count too (they produce no tokens, the lexer stops them).
    let err = parse_err_with(&p, dir.path(), "t.conf", &"{".repeat(50));
    assert_eq!(err.kind(), &ErrorKind::TooDeep(4));
    // A variable can not smuggle in extra depth.
    let err = parse_err_with(&p, dir.path(), "t.conf", "v { a { b { c = 1 } } }\nw { x { y = $v } }");
    assert_eq!(err.to_string(), "t.conf:2:13: exceeded the maximum nesting depth of 4");

    let err = parse_err_with(&p, dir.path(), "t.conf", "a = $E1");
    assert_eq!(
        err.to_string(),
        "t.conf:1:4: variable reference for 'E1' could not be parsed: :1:3: variable reference for 'E2' could not be \
         parsed: :1:3: variable reference for 'E3' could not be parsed: :1:3: exceeded the maximum depth of 2 nested \
         environment variable references"
    );

    let err = parse_err_with(
        &p,
        dir.path(),
        "t.conf",
        "a = [1,2,3,4,5,6,7,8,9,10,]\nb = [$a, $a, $a, $a, $a]",
    );
    assert_eq!(err.kind(), &ErrorKind::ExpansionTooLarge(4096));

    let err = parse_err_with(&p, dir.path(), "t.conf", &format!("a = \"{}\"", "x".repeat(100)));
    assert_eq!(err.to_string(), "file 't.conf' is larger than 64 bytes");

    fs::write(dir.path().join("i1.conf"), "include i2.conf").expect("write");
    fs::write(dir.path().join("i2.conf"), "include i3.conf").expect("write");
    fs::write(dir.path().join("i3.conf"), "a = 1").expect("write");
    let err = parse_err_with(&p, dir.path(), "t.conf", "include i1.conf");
    assert_eq!(
        err.to_string(),
        "t.conf:1:8: error parsing include file 'i1.conf', i1.conf:1:8: error parsing include file 'i2.conf', \
         i2.conf:1:8: exceeded the maximum include depth of 2"
    );
}

#[test]
fn include_bombs_are_bounded() {
    // Each level includes the next one ten times: 10^6 includes without a total cap.
    let dir = tempfile::tempdir().expect("tempdir");
    for level in 0..6 {
        let body = format!("include l{}.conf\n", level + 1).repeat(10);
        fs::write(dir.path().join(format!("l{level}.conf")), body).expect("write");
    }
    fs::write(dir.path().join("l6.conf"), "a = 1\n").expect("write");
    let p = Parser::new().with_limits(Limits {
        max_includes: 500,
        ..Limits::default()
    });
    let err = parse_err_with(&p, dir.path(), "t.conf", "include l0.conf\n");
    assert!(err.to_string().ends_with("more than 500 includes"), "{err}");

    let p = Parser::new().with_limits(Limits {
        max_total_size: 300,
        ..Limits::default()
    });
    let err = parse_err_with(&p, dir.path(), "t.conf", "include l0.conf\n");
    assert!(
        err.to_string()
            .ends_with("the configuration files add up to more than 300 bytes"),
        "{err}"
    );
}

#[test]
fn include_cycles_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("b.conf"), "include t.conf\n").expect("write");
    let err = parse_err_with(&parser_with_env(&[]), dir.path(), "t.conf", "x = 1\ninclude b.conf\n");
    assert_eq!(
        err.to_string(),
        "t.conf:2:9: error parsing include file 'b.conf', b.conf:1:8: error parsing include file 't.conf', include \
         cycle: 't.conf' is already being parsed"
    );
    let err = parse_err_with(&parser_with_env(&[]), dir.path(), "self.conf", "include self.conf\n");
    assert!(matches!(err.kind(), ErrorKind::Include { .. }), "{err}");
}
