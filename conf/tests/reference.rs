//! Differential tests against the reference binary (`nats-server -t -c file`): the one
//! `NATS_REFERENCE_SERVER` names, else the one the repository's `tools/reference-server`
//! prints (it downloads the binary into the user's cache on first use).
//!
//! - parse errors: the reference's message equals our `reference_text()`;
//! - valid files: the digest it prints equals our `config_digest`;
//! - a few hundred pseudo-random snippets: we fail exactly when it fails while parsing,
//!   with the same message.

mod common;

use common::CwdGuard;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn reference() -> PathBuf {
    if let Some(p) = std::env::var_os("NATS_REFERENCE_SERVER") {
        return PathBuf::from(p);
    }
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/reference-server");
    let out = Command::new(&tool)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", tool.display()));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// What the reference says about `dir/name` (first line of its output, prefix removed).
fn check_with(bin: &Path, dir: &Path, name: &str) -> String {
    let out = Command::new(bin)
        .args(["-t", "-c", name])
        .current_dir(dir)
        .output()
        .expect("run the reference server");
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("nats-server: ").unwrap_or(first).to_string()
}

enum Verdict {
    /// The file parsed; the reference printed this digest (or a config-level error).
    Parsed(Option<String>),
    /// The reference failed while parsing, with this message.
    ParseError(String),
}

fn verdict(bin: &Path, dir: &Path, name: &str) -> Verdict {
    let said = check_with(bin, dir, name);
    if let Some(rest) = said.strip_prefix(&format!("configuration file {name} is valid (")) {
        return Verdict::Parsed(Some(rest.trim_end_matches(')').to_string()));
    }
    // Errors about the meaning of a parsed file start with its position.
    if said.starts_with(&format!("{name}:")) || said.contains("unknown field") {
        return Verdict::Parsed(None);
    }
    Verdict::ParseError(said)
}

/// Parses `dir/name` as the reference does (by a relative path from `dir`).
fn ours(dir: &Path, name: &str) -> Result<conf::Map, conf::Error> {
    let _cwd = CwdGuard::enter(dir);
    conf::parse_file(name)
}

/// Compares one file; returns a description of any disagreement.
fn compare(bin: &Path, dir: &Path, name: &str) -> Option<String> {
    let text = fs::read(dir.join(name)).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    match (verdict(bin, dir, name), ours(dir, name)) {
        (Verdict::Parsed(digest), Ok(map)) => match digest {
            Some(d) if d != conf::config_digest(&map) => {
                Some(format!("{text:?}: digest {d} vs ours {}", conf::config_digest(&map)))
            }
            _ => None,
        },
        (Verdict::ParseError(msg), Err(e)) if msg == e.reference_text() => None,
        (Verdict::ParseError(msg), Err(e)) => Some(format!(
            "{text:?}:\n  reference: {msg}\n  ours:      {}",
            e.reference_text()
        )),
        (Verdict::ParseError(msg), Ok(_)) => Some(format!("{text:?}: reference fails ({msg}), we parse")),
        (Verdict::Parsed(_), Err(e)) => Some(format!("{text:?}: reference parses, we fail: {e}")),
    }
}

#[test]
fn parse_errors_match() {
    let bin = reference();
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("bad.conf"), "x = [\n").expect("write");
    let cases = [
        "port = 4222\nlisten: \"abc\n",
        "a = 1\nb = 99999999999999999999",
        "a = 1\nd = 2016-13-04T18:53:41Z",
        "\n\n  a = $CONF_TEST_SURELY_UNSET",
        "aaaa",
        "a { b = 1 }\n  c",
        "a =\nb = 2",
        "a { b = 1",
        "x = \"\\q\"",
        "quote = (\n  foo\n",
        "a = .2",
        "port = 1.5.x",
        "authorization { users = [1] }",
        "include bad.conf",
        "include nope.conf",
        "include /etc/nope.conf",
        "a { 'b",
        "a [ , ]",
        "{ { a = 1 } x",
        "x = 2016-05",
        "include [",
        "include \"x",
    ];
    let mut failures = Vec::new();
    for case in cases {
        fs::write(dir.path().join("t.conf"), case).expect("write");
        failures.extend(compare(&bin, dir.path(), "t.conf"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn digests_of_valid_docs_examples_match() {
    let bin = reference();
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/docs");
    let mut failures = Vec::new();
    let mut valid = 0;
    for entry in fs::read_dir(&docs).expect("fixtures") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        if !name.ends_with(".conf") {
            continue;
        }
        if let Verdict::Parsed(Some(_)) = verdict(&bin, &docs, &name) {
            valid += 1;
        }
        failures.extend(compare(&bin, &docs, &name));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        valid >= 5,
        "expected most examples to be valid for the reference, got {valid}"
    );
}

#[test]
fn random_snippets_agree() {
    let bin = reference();
    const PIECES: &[&str] = &[
        "port",
        "debug",
        "server_name",
        "a",
        "'k'",
        "\"k k\"",
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
        "8eb",
        "1kbb",
        "1.5",
        "1.2.3",
        "127.0.0.1:4222",
        "2016-05-04T18:53:41Z",
        "2016-13-01T00:00:00Z",
        "true",
        "Off",
        "\"s\"",
        "'s'",
        "\"e\\t\\x41\"",
        "\"\\q\"",
        "bare\\x41",
        "$a",
        "$port",
        "$2a$11$x",
        "(\nraw\n)\n",
        "include nope.conf",
        "\0",
        "é",
        "{}",
        "[]",
        "x=[1,2,]",
        "m { k = v }",
        "1.x",
        ".5",
        "99999999999999999999",
        "-",
        "123-",
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut failures = Vec::new();
    let mut parse_errors = 0;
    for _ in 0..300 {
        let n = 1 + next() % 12;
        let text: String = (0..n)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        fs::write(dir.path().join("t.conf"), &text).expect("write");
        failures.extend(compare(&bin, dir.path(), "t.conf"));
        parse_errors += usize::from(ours(dir.path(), "t.conf").is_err());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("300 snippets, {parse_errors} parse errors, all as the reference");
}
