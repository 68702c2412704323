//! Table-driven syntax tests: config text in, tree out (the cases of the reference's parser
//! tests plus the corner cases its lexer defines). Expected trees were cross-checked against
//! the reference implementation.

mod common;

use common::parse_show;

#[track_caller]
fn table(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (input, want) in cases {
        let got = parse_show(input);
        if got != *want {
            failures.push(format!("input {input:?}\n  want {want}\n  got  {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn separators_and_scalars() {
    table(&[
        (
            "foo='1'; bar=2.2; baz=true; boo=22",
            r#"{foo: "1", bar: 2.2f, baz: true, boo: 22}"#,
        ),
        ("foo = 1\nbar: 2\nbaz 3\n", "{foo: 1, bar: 2, baz: 3}"),
        ("foo = 1, bar = 2; baz = 3", "{foo: 1, bar: 2, baz: 3}"),
        ("foo\t=\t1\r\nbar\t2\r\n", "{foo: 1, bar: 2}"),
        ("foo = -123\nbar = 007\nbaz = -0", "{foo: -123, bar: 7, baz: 0}"),
        ("f = 22.2\ng = -0.5\nh = 1.0", "{f: 22.2f, g: -0.5f, h: 1.0f}"),
        (
            "now = 2016-05-04T18:53:41Z\ngmt = false\n",
            "{now: 2016-05-04T18:53:41Z, gmt: false}",
        ),
        ("leap = 2024-02-29T00:00:00Z", "{leap: 2024-02-29T00:00:00Z}"),
        ("a = ''\nb = \"\"", r#"{a: "", b: ""}"#),
        ("a =", r#"{a: ""}"#),
        ("'quoted key' = 1\n\"dq key\": 2", r#"{"quoted key": 1, "dq key": 2}"#),
        ("' foo' : 123", r#"{" foo": 123}"#),
        ("a.b-c_d = 1", r#"{"a.b-c_d": 1}"#),
        ("include=5\nINCLUDE: 6", "{include: 5, INCLUDE: 6}"),
        ("Port = 1\nport = 2", "{Port: 1, port: 2}"),
        ("a = 1\na = 2", "{a: 2}"),
    ]);
}

#[test]
fn booleans() {
    table(&[
        (
            "a=true\nb=TRUE\nc=True\nd=yes\ne=YES\nf=on\ng=On",
            "{a: true, b: true, c: true, d: true, e: true, f: true, g: true}",
        ),
        (
            "a=false\nb=FALSE\nc=no\nd=NO\ne=off\nf=Off",
            "{a: false, b: false, c: false, d: false, e: false, f: false}",
        ),
        (
            "a=\"true\"\nb='no'\nc=tru\nd=\\\\true",
            r#"{a: "true", b: "no", c: "tru", d: "\\true"}"#,
        ),
    ]);
}

#[test]
fn size_suffixes() {
    table(&[
        (
            "k = 8k\nkb = 4kb\nki = 3ki\nkib = 4ki\nm = 1m\nmb = 2MB\nmi = 2Mi\nmib = 64MiB\ng = 2g\ngb = 22GB",
            "{k: 8000, kb: 4096, ki: 3072, kib: 4096, m: 1000000, mb: 2097152, mi: 2097152, mib: 67108864, \
             g: 2000000000, gb: 23622320128}",
        ),
        (
            "gi = 22Gi\ngib = 22GiB\nt = 1t\ntb = 22TB\nti = 22Ti\ntib = 22TiB",
            "{gi: 23622320128, gib: 23622320128, t: 1000000000000, tb: 24189255811072, ti: 24189255811072, \
             tib: 24189255811072}",
        ),
        (
            "p = 1p\npb = 22PB\npi = 22Pi\npib = 22PiB\ne = 1e\neb = 1EB",
            "{p: 1000000000000000, pb: 24769797950537728, pi: 24769797950537728, pib: 24769797950537728, \
             e: 1000000000000000000, eb: 1152921504606846976}",
        ),
        ("a = -1k\nb = -1GB", "{a: -1000, b: -1073741824}"),
        // Go's int64 multiplication wraps.
        ("a = 8eb\nb = 16e", "{a: -9223372036854775808, b: -2446744073709551616}"),
        // Not suffixes: these are strings.
        (
            "a = 1Ghz\nb = 2Pie\nc = 3Mbs\nd = 1i",
            r#"{a: "1Ghz", b: "2Pie", c: "3Mbs", d: "1i"}"#,
        ),
        // An unknown run of b/i after a suffix sets no value (and the key stays pending).
        ("a = 1kbb\nb = 2", "{b: 2}"),
    ]);
}

#[test]
fn strings() {
    table(&[
        (
            "a = bar\nb = bar' \nc = 3xyz\nd = 1.2.3.4",
            r#"{a: "bar", b: "bar", c: "3xyz", d: "1.2.3.4"}"#,
        ),
        (
            "listen: 127.0.0.1:4222\nh: apcera.me:80\nn: nats.io:-1\nc: :-1",
            r#"{listen: "127.0.0.1:4222", h: "apcera.me:80", n: "nats.io:-1", c: ":-1"}"#,
        ),
        (
            "a = nats://u:p@host:4222/path?x=1#frag",
            r#"{a: "nats://u:p@host:4222/path?x=1#frag"}"#,
        ),
        ("a = b#c\nd = e//f", r#"{a: "b#c", d: "e//f"}"#),
        (
            r#"a = "tab\tnl\ncr\rq\"bs\\hex\x41\x7c""#,
            r#"{a: "tab\tnl\ncr\rq\"bs\\hexA|"}"#,
        ),
        (r"a = start\x45\x71end", r#"{a: "startEqend"}"#),
        (r"a = 'raw\t\n'", r#"{a: "raw\\t\\n"}"#),
        (
            "a = 'multi\nline'\nb = \"two\nlines\"",
            r#"{a: "multi\nline", b: "two\nlines"}"#,
        ),
        ("expr = '(true == \"false\")'", r#"{expr: "(true == \"false\")"}"#),
        ("a = \"é ü 日本\"\nb = ünïcödé", r#"{a: "é ü 日本", b: "ünïcödé"}"#),
        // \xE9 alone is not UTF-8: it becomes U+FFFD.
        (r"a = \xe9", "{a: \"\u{fffd}\"}"),
        (r#"a = "\xc3\xa9""#, r#"{a: "é"}"#),
    ]);
}

#[test]
fn blocks() {
    table(&[
        ("numbers (\n1234567890\n)\n", r#"{numbers: "\n1234567890\n"}"#),
        (
            "numbers (\n  12(34)56\n  (\n    7890\n  )\n)\nnext = 1",
            r#"{numbers: "\n  12(34)56\n  (\n    7890\n  )\n", next: 1}"#,
        ),
        // At the very end of the input the reference keeps the ')' in the text.
        ("numbers (\n1\n)", r#"{numbers: "\n1\n)"}"#),
    ]);
}

#[test]
fn comments() {
    table(&[
        ("# only a comment", "{}"),
        ("// only a comment\n", "{}"),
        (
            "a = 1 # trailing\nb = 2 // trailing\n# c\n// c\nc = 3",
            "{a: 1, b: 2, c: 3}",
        ),
        (
            "a = [\n 1, # One\n 2, // Two\n 3 # Three\n 'bar'     ,\n \"bar\"\n]",
            r#"{a: [1, 2, 3, "bar", "bar"]}"#,
        ),
        ("m {\n  # comment\n  a = 1 # c\n  // c\n}", "{m: {a: 1}}"),
        ("", "{}"),
        ("\n\n    \n", "{}"),
    ]);
}

#[test]
fn arrays() {
    table(&[
        ("a = [1, 2, 3, 'bar']", r#"{a: [1, 2, 3, "bar"]}"#),
        ("a = [1,2,3,'bar']", r#"{a: [1, 2, 3, "bar"]}"#),
        ("a [\n 1\n 2\n 'x'\n]", r#"{a: [1, 2, "x"]}"#),
        ("a = []\nb = [ ]\nc = [\n]", "{a: [], b: [], c: []}"),
        ("a = [[1, [2,]], []]", "{a: [[1, [2]], []]}"),
        ("a = [1, 2, ]", "{a: [1, 2]}"),
        ("a = [ 1.5]\nb = [-1]\nc = [true]", "{a: [1.5f], b: [-1], c: [true]}"),
        ("servers = [ \"a.com\", \"b.com\"]", r#"{servers: ["a.com", "b.com"]}"#),
        (
            "listen = [localhost:4222, localhost:4333]",
            r#"{listen: ["localhost:4222", "localhost:4333"]}"#,
        ),
        ("a = [ {x: 1}, {y: 2} ]", "{a: [{x: 1}, {y: 2}]}"),
        (
            "array [\n  { abc: 123 }\n  { xyz: \"word\" }\n]",
            r#"{array: [{abc: 123}, {xyz: "word"}]}"#,
        ),
    ]);
}

#[test]
fn maps() {
    table(&[
        (
            "foo  {\n  host {\n    ip   = '127.0.0.1'\n    port = 4242\n  }\n  servers = [ \"a.com\", \"b.com\", \"c.com\"]\n}",
            r#"{foo: {host: {ip: "127.0.0.1", port: 4242}, servers: ["a.com", "b.com", "c.com"]}}"#,
        ),
        ("foo = {ip='127.0.0.1', port = 4242}", r#"{foo: {ip: "127.0.0.1", port: 4242}}"#),
        ("foo {'bar-1.2.3' = { port:4242 }}", r#"{foo: {"bar-1.2.3": {port: 4242}}}"#),
        ("m {}\nn = {}\no: {\n}", "{m: {}, n: {}, o: {}}"),
        ("m { a = 1; b = 2, c = 3 }", "{m: {a: 1, b: 2, c: 3}}"),
        ("m { a: {b: {c: {d: 1}}} }", "{m: {a: {b: {c: {d: 1}}}}}"),
        ("map {\n  foo = 3xyz;\n}", r#"{map: {foo: "3xyz"}}"#),
        ("map {\n  foo = 3xyz}", r#"{map: {foo: "3xyz"}}"#),
        // A lone '/' before a map key is dropped (reference behaviour).
        ("m { /a = 1 }", "{m: {a: 1}}"),
        // A key without a value inside a map: the map ends up under that key.
        ("foo { bar }", "{bar: {}}"),
    ]);
}

#[test]
fn json_style() {
    table(&[
        ("{}", "{}"),
        ("{\n  # comments in the body\n}", "{}"),
        ("{ listen: 0.0.0.0:4222 }", r#"{listen: "0.0.0.0:4222"}"#),
        ("{\n  listen: 0.0.0.0:4222\n }", r#"{listen: "0.0.0.0:4222"}"#),
        ("\n{\n  {\n    listen: 0.0.0.0:4222 // c\n  }\n  # w1\n}\n# w2\n", r#"{listen: "0.0.0.0:4222"}"#),
        (
            "{\n  \"debug\":              False\n  \"prof_port\":          8221\n  \"server_name\":        \"aws-useast2-natscj1-1\"\n}",
            r#"{debug: false, prof_port: 8221, server_name: "aws-useast2-natscj1-1"}"#,
        ),
        (
            r#"{"http_port": 8227,"port": 4227,"write_deadline": "1h","cluster": {"port": 6222,"routes": ["nats://127.0.0.1:4222","nats://127.0.0.1:4223"]}}"#,
            r#"{http_port: 8227, port: 4227, write_deadline: "1h", cluster: {port: 6222, routes: ["nats://127.0.0.1:4222", "nats://127.0.0.1:4223"]}}"#,
        ),
        (
            "{\n  \"jetstream\": {\n    \"store_dir\": \"/tmp/nats\"\n    \"max_mem\": 1000000,\n  },\n  \"port\": 4222,\n  \"server_name\": \"nats1\"\n}",
            r#"{jetstream: {store_dir: "/tmp/nats", max_mem: 1000000}, port: 4222, server_name: "nats1"}"#,
        ),
        // A stray closing brace at the end is allowed (it reads as a key with no value).
        ("accounts { users = [{}]}\n}\n", "{accounts: {users: [{}]}}"),
        ("{ a = 1\n", "{a: 1}"),
    ]);
}

#[test]
fn variables() {
    table(&[
        ("index = 22\nfoo = $index", "{index: 22, foo: 22}"),
        (
            "index = 22\nnest {\n  index = 11\n  foo = $index\n}\nbar = $index",
            "{index: 22, nest: {index: 11, foo: 11}, bar: 22}",
        ),
        ("m = {a = [1, {b: 2}]}\nn = $m\no = [$m, $m]", "{m: {a: [1, {b: 2}]}, n: {a: [1, {b: 2}]}, o: [{a: [1, {b: 2}]}, {a: [1, {b: 2}]}]}"),
        ("password: $2a$11$ooo", r#"{password: "$2a$11$ooo"}"#),
        ("a = 1\nb { c { d = $a } }", "{a: 1, b: {c: {d: 1}}}"),
        ("a = \"$notvar\"\nb = '$x'", r#"{a: "$notvar", b: "$x"}"#),
        (
            "BAR_USERS = { users = [ {user = \"bar\"} ]}\naccounts {\n  QUUX_USERS = [ { user: quux }]\n  bar = $BAR_USERS\n  quux = { users = $QUUX_USERS }\n}",
            r#"{BAR_USERS: {users: [{user: "bar"}]}, accounts: {QUUX_USERS: [{user: "quux"}], bar: {users: [{user: "bar"}]}, quux: {users: [{user: "quux"}]}}}"#,
        ),
        // Variables are case-sensitive.
        ("a = 1\nb = $A", "error: :2:5: variable reference for 'A' can not be found"),
        // A map is in scope only after it is closed; an array element map never is.
        ("a = [ {x = 1}, $x ]", "error: :1:15: variable reference for 'x' can not be found"),
    ]);
}
