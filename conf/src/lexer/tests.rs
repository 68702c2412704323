//! Token streams for the syntax cases of the reference's lexer tests.

use super::*;
use TokenKind::*;

/// Lexes `input` to the end: `(kind, text)` per token, and the error message if any.
fn lex(input: &str) -> (Vec<(TokenKind, std::string::String)>, Option<std::string::String>) {
    let mut lexer = Lexer::new(input.as_bytes(), 64);
    let mut out = Vec::new();
    loop {
        match lexer.next_token() {
            Ok(tok) if tok.kind == Eof => return (out, None),
            Ok(tok) => out.push((tok.kind, lossy_string(&tok.text))),
            Err(e) => return (out, Some(e.message)),
        }
    }
}

fn toks(list: &[(TokenKind, &str)]) -> Vec<(TokenKind, std::string::String)> {
    list.iter().map(|(k, t)| (*k, t.to_string())).collect()
}

#[track_caller]
fn check(input: &str, want: &[(TokenKind, &str)]) {
    let (got, err) = lex(input);
    assert_eq!(err, None, "input {input:?}");
    assert_eq!(got, toks(want), "input {input:?}");
}

#[track_caller]
fn check_err(input: &str, want: &[(TokenKind, &str)], message: &str) {
    let (got, err) = lex(input);
    assert_eq!(got, toks(want), "input {input:?}");
    assert_eq!(err.as_deref(), Some(message), "input {input:?}");
}

#[test]
fn key_value_forms() {
    for input in [
        "foo = \"bar\"",
        "foo = 'bar'",
        "foo='bar'",
        "foo='bar'\r\n",
        "foo=\t'bar'\t",
        "foo bar",
        "foo: bar",
    ] {
        check(input, &[(Key, "foo"), (String, "bar")]);
    }
    for input in [
        "foo = 123",
        "foo=123",
        "foo=123\r\n",
        "foo : 123",
        "foo:123",
        "foo 123",
        "foo\t\t123\r\n",
    ] {
        check(input, &[(Key, "foo"), (Integer, "123")]);
    }
    check("foo", &[(Key, "foo")]);
    check("' foo' : 123", &[(Key, " foo"), (Integer, "123")]);
    check("\" foo\" : 123", &[(Key, " foo"), (Integer, "123")]);
}

#[test]
fn scalars() {
    check("foo = -123", &[(Key, "foo"), (Integer, "-123")]);
    check("foo = 22.2", &[(Key, "foo"), (Float, "22.2")]);
    check("foo = true", &[(Key, "foo"), (Bool, "true")]);
    check(
        "foo = 2016-05-04T18:53:41Z",
        &[(Key, "foo"), (DateTime, "2016-05-04T18:53:41Z")],
    );
    check("foo = 'bar\\r\\n  \\t'", &[(Key, "foo"), (String, "bar\\r\\n  \\t")]);
    check("foo = 3xyz", &[(Key, "foo"), (String, "3xyz")]);
    check("foo = 3xyz,", &[(Key, "foo"), (String, "3xyz")]);
    check("foo = bar' ", &[(Key, "foo"), (String, "bar")]);
    check("foo = \"\"", &[(Key, "foo"), (String, "")]);
    check("foo = ''", &[(Key, "foo"), (String, "")]);
    check("foo = \\\\true", &[(Key, "foo"), (String, "\\true")]);
    check("foo = \\\\$var", &[(Key, "foo"), (String, "\\$var")]);
}

#[test]
fn size_suffixes() {
    for s in ["1k", "1K", "1m", "1M", "1g", "1G", "1MB", "1Gb", "-1m", "22GiB", "2e"] {
        check(&format!("foo = {s}"), &[(Key, "foo"), (Integer, s)]);
    }
    check("foo = -1GB ", &[(Key, "foo"), (Integer, "-1GB")]);
    check("foo = 1Ghz", &[(Key, "foo"), (String, "1Ghz")]);
    check("foo = 2Pie", &[(Key, "foo"), (String, "2Pie")]);
    check("foo = 3Mbs,", &[(Key, "foo"), (String, "3Mbs")]);
    check(
        "foo = 4Gb, bar = 5Gø",
        &[(Key, "foo"), (Integer, "4Gb"), (Key, "bar"), (String, "5Gø")],
    );
}

#[test]
fn escapes() {
    check("foo = \\x65", &[(Key, "foo"), (String, "e")]);
    check("foo = \"\\\\end\"", &[(Key, "foo"), (String, "\\end")]);
    check("foo = \"start\\\\\"", &[(Key, "foo"), (String, "start\\")]);
    check("foo = \\x45\\x71", &[(Key, "foo"), (String, "Eq")]);
    check("foo = start\\x45\\x71", &[(Key, "foo"), (String, "startEq")]);
    check("foo = start\\x7Cend", &[(Key, "foo"), (String, "start|end")]);
    check("foo = \\x3c\\x3eend", &[(Key, "foo"), (String, "<>end")]);
    check("foo = \\x3cmiddle\\x3E", &[(Key, "foo"), (String, "<middle>")]);
    check(
        "foo  = \\t\nbar  = \\r\nbaz  = \\n\nq    = \\\"\nbs   = \\\\\n",
        &[
            (Key, "foo"),
            (String, "\t"),
            (Key, "bar"),
            (String, "\r"),
            (Key, "baz"),
            (String, "\n"),
        ]
        .into_iter()
        .chain([(Key, "q"), (String, "\""), (Key, "bs"), (String, "\\")])
        .collect::<Vec<_>>(),
    );
    // \xE9 alone is not UTF-8: it reads back as U+FFFD.
    let mut lexer = Lexer::new(b"foo = \\xe9", 8);
    assert_eq!(lexer.next_token().map(|t| t.text), Ok(b"foo".to_vec()));
    assert_eq!(lexer.next_token().map(|t| t.text), Ok(vec![0xe9]));
}

#[test]
fn escape_errors() {
    let eol = "Expected two hexadecimal digits after '\\x', but hit end of line";
    check_err("foo = xyz\\x\n", &[(Key, "foo")], eol);
    check_err("foo = xyz\\xF\n", &[(Key, "foo")], eol);
    check_err(
        "foo = \"[\\x]\"",
        &[(Key, "foo")],
        "Expected two hexadecimal digits after '\\x', but got ']\"'",
    );
    check_err(
        "foo = \"[\\xe]\"",
        &[(Key, "foo")],
        "Expected two hexadecimal digits after '\\x', but got 'e]'",
    );
    check_err(
        "foo = \\y",
        &[(Key, "foo")],
        "Invalid escape character 'y'. Only the following escape characters are allowed: \\xXX, \\t, \\n, \\r, \\\", \\\\.",
    );
}

#[test]
fn variables() {
    for input in ["foo = $bar", "foo =$bar", "foo $bar"] {
        check(input, &[(Key, "foo"), (Variable, "bar")]);
    }
}

#[test]
fn arrays() {
    let want = [
        (Key, "foo"),
        (ArrayStart, ""),
        (Integer, "1"),
        (Integer, "2"),
        (Integer, "3"),
        (String, "bar"),
    ];
    let mut want = want.to_vec();
    want.push((ArrayEnd, ""));
    for input in ["foo = [1, 2, 3, 'bar']", "foo = [1,2,3,'bar']", "foo = [1, 2,3,'bar']"] {
        check(input, &want);
    }
    let ml = "\n# top level comment\nfoo = [\n 1, # One\n 2, // Two\n 3 # Three\n 'bar'     ,\n \"bar\"\n]\n";
    let mut want = want.clone();
    want.insert(6, (String, "bar"));
    check(ml, &want);
    check("\nfoo = [\n 1 // foo\n 2\n 3\n 'bar'\n \"bar\"\n]\n", &want);
    // A number directly before ']' reads as a string including the ']' (reference behaviour).
    check_err(
        "x = [1]",
        &[(Key, "x"), (ArrayStart, ""), (String, "1]")],
        "Expected an array value terminator \",\" or an array terminator \"]\", but got '\0' instead.",
    );
}

#[test]
fn maps() {
    let flat = [
        (Key, "foo"),
        (MapStart, ""),
        (Key, "ip"),
        (String, "127.0.0.1"),
        (Key, "port"),
        (Integer, "4242"),
    ];
    let mut flat = flat.to_vec();
    flat.push((MapEnd, ""));
    check("foo = {ip='127.0.0.1', port = 4242}", &flat);
    check(
        "\nfoo = {\n  ip = '127.0.0.1' # the IP\n  port= 4242 // the port\n}\n",
        &flat,
    );
    check(
        "\nfoo = {\n  host = {\n    ip = '127.0.0.1'\n    port= 4242\n  }\n}\n",
        &[
            (Key, "foo"),
            (MapStart, ""),
            (Key, "host"),
            (MapStart, ""),
            (Key, "ip"),
            (String, "127.0.0.1"),
        ]
        .into_iter()
        .chain([(Key, "port"), (Integer, "4242"), (MapEnd, ""), (MapEnd, "")])
        .collect::<Vec<_>>(),
    );
    for input in ["foo = {'bar' = 4242}", "foo = {\"bar\" = 4242}"] {
        check(
            input,
            &[
                (Key, "foo"),
                (MapStart, ""),
                (Key, "bar"),
                (Integer, "4242"),
                (MapEnd, ""),
            ],
        );
    }
    check(
        "foo = {'bar-1.2.3' = { port:4242 }}",
        &[
            (Key, "foo"),
            (MapStart, ""),
            (Key, "bar-1.2.3"),
            (MapStart, ""),
            (Key, "port"),
            (Integer, "4242"),
        ]
        .into_iter()
        .chain([(MapEnd, ""), (MapEnd, "")])
        .collect::<Vec<_>>(),
    );
}

#[test]
fn semicolons_and_bare_strings() {
    check(
        "foo='1'; bar=2.2; baz=true;",
        &[
            (Key, "foo"),
            (String, "1"),
            (Key, "bar"),
            (Float, "2.2"),
            (Key, "baz"),
            (Bool, "true"),
        ],
    );
    check(
        "\nfoo = 123\nbar = baz\nbaz=boo\nmap {\n id:one\n id2 : onetwo\n}\nt true\nf false\ntstr \"true\"\nfkey = five # c\n",
        &[(Key, "foo"), (Integer, "123"), (Key, "bar"), (String, "baz"), (Key, "baz"), (String, "boo")]
            .into_iter()
            .chain([(Key, "map"), (MapStart, ""), (Key, "id"), (String, "one"), (Key, "id2"), (String, "onetwo")])
            .chain([(MapEnd, ""), (Key, "t"), (Bool, "true"), (Key, "f"), (Bool, "false"), (Key, "tstr")])
            .chain([(String, "true"), (Key, "fkey"), (String, "five")])
            .collect::<Vec<_>>(),
    );
}

#[test]
fn blocks() {
    check(
        "\nnumbers (\n1234567890\n)\n",
        &[(Key, "numbers"), (String, "\n1234567890\n")],
    );
    check(
        "\nnumbers (\n  12(34)56\n  (\n    7890\n  )\n)\n",
        &[(Key, "numbers"), (String, "\n  12(34)56\n  (\n    7890\n  )\n")],
    );
    // A NUL reads as end of input; a real end of input right after ')' keeps the ')'.
    check("numbers (\n1\n)\0", &[(Key, "numbers"), (String, "\n1\n")]);
    check("numbers (\n1\n)", &[(Key, "numbers"), (String, "\n1\n)")]);
    check_err(
        "\nlisten = 4222\n\nquote = (\n\n  foo = bar\n\n",
        &[(Key, "listen"), (Integer, "4222"), (Key, "quote")],
        "Unexpected EOF processing block.",
    );
}

#[test]
fn ip_addresses_and_hosts() {
    for (input, kind, text) in [
        ("listen: 127.0.0.1:4222", String, "127.0.0.1:4222"),
        ("listen: 127.0.0.1", String, "127.0.0.1"),
        ("listen: apcera.me:80", String, "apcera.me:80"),
        ("listen: nats.io:-1", String, "nats.io:-1"),
        ("listen: -1", Integer, "-1"),
        ("listen: :-1", String, ":-1"),
        ("listen = :80", String, ":80"),
    ] {
        check(input, &[(Key, "listen"), (kind, text)]);
    }
    check(
        "listen = [localhost:4222, localhost:4333]",
        &[
            (Key, "listen"),
            (ArrayStart, ""),
            (String, "localhost:4222"),
            (String, "localhost:4333"),
            (ArrayEnd, ""),
        ],
    );
}

#[test]
fn includes() {
    for input in [
        "include \"users.conf\"",
        "include 'users.conf'",
        "include users.conf",
        "INCLUDE users.conf",
    ] {
        check(input, &[(Include, "users.conf")]);
    }
    for input in [
        "foo { include users.conf }",
        "foo {include users.conf}",
        "foo { include 'users.conf' }",
    ] {
        check(
            input,
            &[(Key, "foo"), (MapStart, ""), (Include, "users.conf"), (MapEnd, "")],
        );
    }
    check("include=1", &[(Key, "include"), (Integer, "1")]);
    check_err("include [", &[], "Expected include value but found start of an array");
    check_err("include {", &[], "Expected include value but found start of a map");
    check_err("include (", &[], "Expected include value but found start of a block");
    check_err("include 1", &[], "Expected include value but found start of a number");
    check_err("include \\x", &[], "Expected include value but found escape sequence");
    check_err("include \n", &[], "Expected include value but found new line");
    check_err("include 'x", &[], "Unexpected EOF in quoted include");
    check_err("include \"x", &[], "Unexpected EOF in double quoted include");
}

#[test]
fn json_compat() {
    check(
        "{\n  \"http_port\": 8223\n}\n",
        &[(Key, "http_port"), (Integer, "8223")],
    );
    // A closing brace with no opening one is a key (allowed last in a file).
    check(
        "a { b = [{}]}\n}\n",
        &[
            (Key, "a"),
            (MapStart, ""),
            (Key, "b"),
            (ArrayStart, ""),
            (MapStart, ""),
            (MapEnd, ""),
        ]
        .into_iter()
        .chain([(ArrayEnd, ""), (MapEnd, ""), (Key, "}")])
        .collect::<Vec<_>>(),
    );
    check(
        "{\"http_port\": 8224,\"port\": 4224}\n",
        &[(Key, "http_port"), (Integer, "8224"), (Key, "port"), (Integer, "4224")],
    );
    check(
        "{\n \"jetstream\": {\n  \"store_dir\": \"/tmp/nats\"\n  \"max_mem\": 1000000,\n },\n \"port\": 4222\n}\n",
        &[
            (Key, "jetstream"),
            (MapStart, ""),
            (Key, "store_dir"),
            (String, "/tmp/nats"),
            (Key, "max_mem"),
        ]
        .into_iter()
        .chain([(Integer, "1000000"), (MapEnd, ""), (Key, "port"), (Integer, "4222")])
        .collect::<Vec<_>>(),
    );
}

#[test]
fn syntax_errors() {
    check_err("foo = .2", &[(Key, "foo")], "Floats must start with a digit");
    check_err(" :foo = 22", &[], "Unexpected key separator ':'");
    check_err(
        "foo = 1.x",
        &[(Key, "foo")],
        "Floats must have a digit after the '.', but got 'x' instead.",
    );
    check_err("foo = -x", &[(Key, "foo")], "Expected a digit but got 'x'.");
    check_err("foo = -.5", &[(Key, "foo")], "Floats must start with a digit, not '.'.");
    check_err(
        "foo = 123-",
        &[(Key, "foo")],
        "All ISO8601 dates must be in full Zulu form.",
    );
    check_err(
        "foo = 2016-0x",
        &[(Key, "foo")],
        "Expected digit in ISO8601 datetime, but found 'x' instead.",
    );
    check_err(
        "foo = 2016-05-04 ",
        &[(Key, "foo")],
        "Expected 'T' in ISO8601 datetime, but found ' ' instead.",
    );
    check_err("foo =\nbar", &[(Key, "foo")], "Expected value but found new line");
    check_err(
        "foo = 1 2",
        &[(Key, "foo"), (Integer, "1")],
        "Expected a top-level value to end with a new line, comment or EOF, but got '2' instead.",
    );
    check_err(
        "a { b = 1",
        &[(Key, "a"), (MapStart, ""), (Key, "b"), (Integer, "1")],
        "Expected a map value terminator \",\" or a map terminator \"}\", but got '\0' instead.",
    );
    check_err(
        "a { = 1 }",
        &[(Key, "a"), (MapStart, "")],
        "Unexpected key separator '='.",
    );
    check_err(
        "a { b ,}",
        &[(Key, "a"), (MapStart, ""), (Key, "b")],
        "Unexpected map value terminator \",\".",
    );
    check_err(
        "a { ] }",
        &[(Key, "a"), (MapStart, "")],
        "Unexpected array end ']' processing map.",
    );
    check_err(
        "a [ , ]",
        &[(Key, "a"), (ArrayStart, "")],
        "Unexpected array value terminator ','.",
    );
    check_err(
        "a [ 1 2 ]",
        &[(Key, "a"), (ArrayStart, ""), (Integer, "1")],
        "Expected an array value terminator \",\" or an array terminator \"]\", but got '2' instead.",
    );
    check_err(
        "{ a = 1 x",
        &[(Key, "a"), (Integer, "1")],
        "Expected a block-level value to end with a new line, comment or EOF, but got 'x' instead.",
    );
    check_err(
        "{ { a = 1 } x",
        &[(Key, "a"), (Integer, "1")],
        "Expected a block-level to end with a '}', but got 'x' instead.",
    );
    check_err(
        "\nlisten: \"localhost:4242\n\nhttp: localhost:8222\n",
        &[(Key, "listen")],
        "Unexpected EOF.",
    );
    check_err(
        "\nlisten: 'localhost:4242\n\nhttp: localhost:8222\n",
        &[(Key, "listen")],
        "Unexpected EOF.",
    );
    check_err(
        "\nlisten = 4222\n\ncluster = {\n\n  foo = bar\n\n",
        &[
            (Key, "listen"),
            (Integer, "4222"),
            (Key, "cluster"),
            (MapStart, ""),
            (Key, "foo"),
            (String, "bar"),
        ],
        "Unexpected EOF processing map.",
    );
    check_err(
        "a { 'b",
        &[(Key, "a"), (MapStart, "")],
        "Unexpected EOF processing quoted map key.",
    );
    check_err(
        "a { \"b",
        &[(Key, "a"), (MapStart, "")],
        "Unexpected EOF processing double quoted map key.",
    );
    check_err(
        "a { b",
        &[(Key, "a"), (MapStart, "")],
        "Unexpected EOF processing map key.",
    );
    check_err(
        "A@@Føøøø?˛ø:{øøøø˙˙",
        &[(Key, "A@@Føøøø?˛ø"), (MapStart, "")],
        "Unexpected EOF processing map key.",
    );
}

#[test]
fn dangling_quotes_span_lines() {
    check_err(
        "\nfoo = \"\nlisten: \"\n\nhttp: localhost:8222\n\n\"\n",
        &[
            (Key, "foo"),
            (String, "\nlisten: "),
            (Key, "http"),
            (String, "localhost:8222"),
        ],
        "Unexpected EOF.",
    );
}

#[test]
fn nesting_is_bounded() {
    let deep = "{".repeat(100);
    let mut lexer = Lexer::new(deep.as_bytes(), 10);
    let err = lexer.next_token().expect_err("too deep");
    assert!(err.too_deep);
    // After an error the lexer only reports end of input.
    assert_eq!(lexer.next_token().map(|t| t.kind), Ok(Eof));
}

#[test]
fn offsets() {
    let mut lexer = Lexer::new(b"foo = \"bar\"\n  x [1]", 8);
    let offsets: Vec<usize> = std::iter::from_fn(|| lexer.next_token().ok().filter(|t| t.kind != Eof))
        .map(|t| t.offset)
        .collect();
    // key, string (inside the quotes), key, '[' , "1]"
    assert_eq!(offsets, vec![0, 7, 14, 16, 17]);
}

#[test]
fn decode_matches_go() {
    assert_eq!(decode_char(b"a"), ('a', 1));
    assert_eq!(decode_char("é".as_bytes()), ('é', 2));
    assert_eq!(decode_char(b"\xe2\x82"), (char::REPLACEMENT_CHARACTER, 1));
    assert_eq!(decode_char(b"\xff"), (char::REPLACEMENT_CHARACTER, 1));
    assert_eq!(lossy_string(b"a\xe2\x82b"), "a\u{fffd}\u{fffd}b");
    assert!(is_include_keyword("İnclude".as_bytes()));
    assert!(!is_include_keyword(b"includes"));
}
