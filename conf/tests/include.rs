//! `include` with real files in temporary directories.

mod common;

use std::fs;
use std::path::Path;

use common::{parser_with_env, show};

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

#[test]
fn reference_simple_conf() {
    // nats-server's conf/simple.conf and its includes.
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "simple.conf",
        "listen: 127.0.0.1:4222\n\nauthorization {\n  include 'includes/users.conf' # Pull in from file\n  timeout: 0.5\n}\n",
    );
    write(
        dir.path(),
        "includes/users.conf",
        "# Users configuration\n\ninclude ./passwords.conf;\n\nusers = [\n  {user: alice, password: $ALICE_PASS}\n  \
         {user: bob,   password: $BOB_PASS}\n]\n",
    );
    write(
        dir.path(),
        "includes/passwords.conf",
        "# Just foo & bar for testing\nALICE_PASS: $2a$10$UHR6GhotWhpLsKtVP0/i6.Nh9.fuY73cWjLoJjb2sKT8KISBcUW5q\nBOB_PASS: \
         $2a$11$dZM98SpGeI7dCFFGSpt.JObQcix8YHml4TBUZoge9R1uxnMIln5ly\n",
    );
    let map = parser_with_env(&[])
        .parse_file(dir.path().join("simple.conf"))
        .expect("parse");
    let alice = "$2a$10$UHR6GhotWhpLsKtVP0/i6.Nh9.fuY73cWjLoJjb2sKT8KISBcUW5q";
    let bob = "$2a$11$dZM98SpGeI7dCFFGSpt.JObQcix8YHml4TBUZoge9R1uxnMIln5ly";
    assert_eq!(
        show(&map),
        format!(
            r#"{{listen: "127.0.0.1:4222", authorization: {{ALICE_PASS: "{alice}", BOB_PASS: "{bob}", users: [{{user: "alice", password: "{alice}"}}, {{user: "bob", password: "{bob}"}}], timeout: 0.5f}}}}"#
        )
    );

    // Included keys keep their own file and position.
    let auth = map
        .get("authorization")
        .and_then(|v| v.as_map())
        .expect("authorization");
    let alice_entry = auth.get_entry("ALICE_PASS").expect("ALICE_PASS");
    assert_eq!(
        alice_entry.key_pos.to_string(),
        format!("{}:2:1", dir.path().join("includes/passwords.conf").display())
    );
    // ... and, having been used as a variable in users.conf, are flagged so.
    assert!(alice_entry.value.used_as_variable);
    let users = auth.get("users").and_then(|v| v.as_array()).expect("users");
    let first = users.first().and_then(|u| u.as_map()).expect("user");
    let pw = first.get_entry("password").expect("password");
    assert_eq!((pw.key_pos.line, pw.key_pos.column), (6, 17));
    assert!(pw
        .key_pos
        .file
        .as_deref()
        .is_some_and(|f| f.ends_with("includes/users.conf")));
}

#[test]
fn included_keys_are_variables_for_the_includer() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "includes/passwords.conf",
        "# Just foo & bar for testing\nALICE_PASS: $2a$10$UHR6\nBOB_PASS: $2a$11$dZM9\n",
    );
    write(
        dir.path(),
        "main.conf",
        "authorization {\n\n  include \"./includes/passwords.conf\"\n\n  CAROL_PASS: foo\n\n  users = [\n   {user: alice, \
         password: $ALICE_PASS}\n   {user: carol, password: $CAROL_PASS}\n  ]\n}\n",
    );
    let map = parser_with_env(&[])
        .parse_file(dir.path().join("main.conf"))
        .expect("parse");
    let auth = map
        .get("authorization")
        .and_then(|v| v.as_map())
        .expect("authorization");
    let pos = |k: &str| {
        let e = auth.get_entry(k).expect("key");
        (e.key_pos.line, e.key_pos.reference_column(), e.value.used_as_variable)
    };
    // Positions as the reference reports them (its test checks these numbers).
    assert_eq!(pos("ALICE_PASS"), (2, 1, true));
    assert_eq!(pos("BOB_PASS"), (3, 1, false));
    assert_eq!(pos("CAROL_PASS"), (5, 3, true));
    assert_eq!(
        show(auth),
        r#"{ALICE_PASS: "$2a$10$UHR6", BOB_PASS: "$2a$11$dZM9", CAROL_PASS: "foo", users: [{user: "alice", password: "$2a$10$UHR6"}, {user: "carol", password: "foo"}]}"#
    );
}

#[test]
fn included_files_do_not_see_the_includers_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "inc.conf", "b = $a\n");
    write(dir.path(), "main.conf", "a = 1\ninclude inc.conf\n");
    let err = parser_with_env(&[])
        .parse_file(dir.path().join("main.conf"))
        .expect_err("a is not visible");
    assert_eq!(
        err.reference_text(),
        "error parsing include file 'inc.conf', variable reference for 'a' on line 1 can not be found"
    );
    // The environment is visible to both.
    let map = parser_with_env(&[("a", "env")])
        .parse_file(dir.path().join("main.conf"))
        .expect("parse");
    assert_eq!(show(&map), r#"{a: 1, b: "env"}"#);
}

#[test]
fn json_includes_into_maps() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "foo.json", r#"{ "users": [ {"user": "foo"} ] }"#);
    write(dir.path(), "bar.json", "{\n  \"users\": [ {\"user\": \"bar\"} ]\n}");
    write(dir.path(), "quux.json", "{}");
    write(dir.path(), "empty.conf", "");
    write(
        dir.path(),
        "comments.conf",
        "\n   # just some comments,\n   # and no key values also ok.\n",
    );
    write(
        dir.path(),
        "main.conf",
        "accounts {\n  foo  { include 'foo.json'  }\n  bar  { include 'bar.json'  }\n  quux { include 'quux.json' }\n  \
         e { include empty.conf; include comments.conf }\n}\n",
    );
    let map = parser_with_env(&[])
        .parse_file(dir.path().join("main.conf"))
        .expect("parse");
    assert_eq!(
        show(&map),
        r#"{accounts: {foo: {users: [{user: "foo"}]}, bar: {users: [{user: "bar"}]}, quux: {}, e: {}}}"#
    );
}

#[test]
fn includes_resolve_relative_to_each_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a/main.conf", "include b/one.conf\nx = $one\n");
    write(
        dir.path(),
        "a/b/one.conf",
        "one = 1\ninclude ../two.conf\ninclude c/three.conf\n",
    );
    write(dir.path(), "a/two.conf", "two = 2\n");
    write(dir.path(), "a/b/c/three.conf", "three = [3,]\n");
    let map = parser_with_env(&[])
        .parse_file(dir.path().join("a/main.conf"))
        .expect("parse");
    assert_eq!(show(&map), r#"{one: 1, two: 2, three: [3], x: 1}"#);
    let two = map.get_entry("two").expect("two");
    assert_eq!(
        two.key_pos.file.as_deref(),
        Some(dir.path().join("a/two.conf").as_path())
    );
}

#[test]
fn include_forms() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "x.conf", "k = v\n");
    for form in [
        "include x.conf",
        "include 'x.conf'",
        "include \"x.conf\"",
        "INCLUDE x.conf",
        "include\tx.conf;",
    ] {
        write(dir.path(), "main.conf", &format!("{form}\nm {{ {form} }}\n"));
        let map = parser_with_env(&[])
            .parse_file(dir.path().join("main.conf"))
            .expect(form);
        assert_eq!(show(&map), r#"{k: "v", m: {k: "v"}}"#, "{form}");
    }
}

#[test]
fn a_file_may_be_included_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "u.conf", "users = [{user: a}]\n");
    write(
        dir.path(),
        "main.conf",
        "accounts { A { include u.conf }, B { include u.conf } }\n",
    );
    let map = parser_with_env(&[])
        .parse_file(dir.path().join("main.conf"))
        .expect("parse");
    assert_eq!(
        show(&map),
        r#"{accounts: {A: {users: [{user: "a"}]}, B: {users: [{user: "a"}]}}}"#
    );
}
