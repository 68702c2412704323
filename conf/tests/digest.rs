//! `config_digest` against the digests the reference computes (nats-server's own test
//! vectors, and `nats-server -t` output for configs with every value type).

use std::fs;

fn digest_of(text: &str, includes: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, body) in includes {
        fs::write(dir.path().join(name), body).expect("write include");
    }
    let main = dir.path().join("nats.conf");
    fs::write(&main, text).expect("write config");
    let map = conf::parse_file(&main).expect("parse");
    conf::config_digest(&map)
}

#[test]
fn reference_test_vectors() {
    let bar = "sha256:226e49e13d16e5e8aa0d62e58cd63361bf097d3e2b2444aa3044334628a2e8de";
    assert_eq!(digest_of("foo = bar", &[]), bar);
    assert_eq!(
        digest_of("# Comments and whitespace have no effect\n   foo = bar\n  ", &[]),
        bar
    );
    assert_eq!(digest_of("'foo': 'bar'\n", &[]), bar);
    assert_eq!(digest_of("{ 'foo': 'bar' }\n", &[]), bar);
    assert_eq!(
        digest_of(
            r#"# substitutions
            BAR_USERS = { users = [ {user = "bar"} ]}
            hello = 'world'
            accounts {
              QUUX_USERS = [ { user: quux }]
              bar = $BAR_USERS
              quux = { users = $QUUX_USERS }
            }
            very { nested { env { VAR = 'NESTED', quux = $VAR }}}
            "#,
            &[]
        ),
        "sha256:bddb282343249c26d3edcef9bfaa9d2711505fc67210380e871405ba394a9186"
    );
    assert_eq!(
        digest_of(
            r#"hello = 'world'
            accounts {
              bar  = { users = [ { user = "bar" } ]}
              quux = { users = [ { user: quux   } ]}
            }
            very { nested { env { quux = 'NESTED' }}}
            "#,
            &[]
        ),
        "sha256:34f8faf3f269fe7509edc4742f20c8c4a7ad51fe21f8b361764314b533ac3ab5"
    );
    assert_eq!(
        digest_of(
            r#"BAR_USERS = { users = [ {user = "foo"} ]}
            bar = $BAR_USERS
            accounts {
              users = $BAR_USERS
            }
            "#,
            &[]
        ),
        "sha256:b0e2ba0b8ec2cb75681b5c5d61789cda0c9942c2f9fe16cdb7f6703364485360"
    );
    let accounts = "sha256:e72d70c91b64b0f880f86decb95ec2600cbdcf8bdcd2355fce5ebc54a84a77e9";
    assert_eq!(
        digest_of(
            "accounts {\n foo { include 'foo.conf'}\n bar { users = [{user = \"bar\"}] }\n quux { include 'quux.conf'}\n}\n",
            &[("foo.conf", r#" users = [{user = "foo"}]"#), ("quux.conf", r#" users = [{user = "quux"}]"#)]
        ),
        accounts
    );
    assert_eq!(
        digest_of(
            "accounts {\n foo { include 'foo.conf'}\n bar { include 'bar.conf'}\n quux { include 'quux.conf'}\n}\n",
            &[
                ("foo.conf", r#" users = [{user = "foo"}]"#),
                ("bar.conf", r#" users = [{user = "bar"}]"#),
                ("quux.conf", r#" users = [{user = "quux"}]"#)
            ]
        ),
        accounts
    );
}
