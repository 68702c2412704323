//! Creds, decorated JWT and seed files.

use super::*;

const ONE_CREDS: &str = include_str!("../testdata/one.creds");

#[test]
fn go_creds_file_reads() {
    let jwt = parse_decorated_jwt(ONE_CREDS);
    let user = decode_user(jwt).unwrap();
    let kp = parse_decorated_user_nkey(ONE_CREDS).unwrap();
    assert_eq!(kp.public_key(), user.claims.subject);
    // The same with CRLF line ends.
    let crlf = ONE_CREDS.replace('\n', "\r\n");
    assert_eq!(parse_decorated_jwt(&crlf), jwt);
    assert_eq!(parse_decorated_nkey(&crlf).unwrap().public_key(), user.claims.subject);
}

#[test]
fn written_creds_read_back() {
    let c = Chain::new();
    let jwt = UserClaims::new(c.user.public_key()).encode(&c.acc, NOW).unwrap();
    let seed = c.user.seed().unwrap();
    let creds = format_user_config(&jwt, &seed).unwrap();
    assert!(creds.starts_with("-----BEGIN NATS USER JWT-----\n"));
    assert!(creds.contains("------END NATS USER JWT------\n\n*****"));
    assert!(creds.contains("-----BEGIN USER NKEY SEED-----\n"));
    assert_eq!(parse_decorated_jwt(&creds), jwt);
    assert_eq!(parse_decorated_user_nkey(&creds).unwrap().seed().unwrap(), seed);
    assert_eq!(decorated_blocks_of(&creds), 2);
    let other = KeyPair::new_user().seed().unwrap();
    assert_eq!(
        format_user_config(&jwt, &other).unwrap_err().to_string(),
        "nkey seed does not match the jwt subject"
    );
    let acc_jwt = c.acc_claims.encode(&c.op, NOW).unwrap();
    assert_eq!(
        format_user_config(&acc_jwt, &seed).unwrap_err().to_string(),
        r#""account" cannot be serialized as a user config"#
    );
    let decorated = decorate_jwt(&acc_jwt).unwrap();
    assert!(decorated.starts_with("-----BEGIN NATS ACCOUNT JWT-----\n"));
    assert_eq!(
        decode_account(parse_decorated_jwt(&decorated)).unwrap().claims.subject,
        c.acc.public_key()
    );
}

fn decorated_blocks_of(s: &str) -> usize {
    super::super::creds::decorated_blocks(s).len()
}

#[test]
fn bare_files() {
    let c = Chain::new();
    let jwt = c.acc_claims.encode(&c.op, NOW).unwrap();
    // A bare JWT file, trailing newline and all, is the JWT.
    let file = format!("{jwt}\n");
    assert_eq!(parse_decorated_jwt(&file), file);
    assert!(decode_account(parse_decorated_jwt(&file)).is_ok());
    // A bare seed file, or a seed on some line.
    let seed = c.acc.seed().unwrap();
    assert_eq!(
        parse_decorated_nkey(&format!("# key\n  {seed}\n")).unwrap_err(),
        JwtError::NotSeed
    );
    assert_eq!(
        parse_decorated_nkey(&format!("# key\n{seed}\r\n"))
            .unwrap()
            .public_key(),
        c.acc.public_key()
    );
    assert_eq!(parse_decorated_user_nkey(&seed).unwrap_err(), JwtError::NotUserSeed);
    assert_eq!(parse_decorated_nkey("nothing here").unwrap_err(), JwtError::NoSeed);
    assert!(decorate_seed(&seed)
        .unwrap()
        .contains("-----BEGIN ACCOUNT NKEY SEED-----"));
    assert!(decorate_seed("S").is_err() && decorate_seed("SX0").is_err());
}

#[test]
fn block_shapes() {
    let cases: [(&str, &[&str]); 7] = [
        ("---a---\nTOKEN\n---b---\n", &["TOKEN"]),
        ("junk -----BEGIN-----\nT.1\n------END------", &["T.1"]),
        ("-----\nT\n------\n", &[]),
        ("------\nT X\n------\n", &[]),
        ("------\nT\n x------\n", &[]),
        ("------\nT\n------\r", &[]),
        ("------\n\n------\n------\nB=\n------\n", &["B="]),
    ];
    for (input, want) in cases {
        assert_eq!(super::super::creds::decorated_blocks(input), want, "{input:?}");
    }
}
