//! Decorated files: creds files (a `-----BEGIN NATS USER JWT-----` block and a
//! `-----BEGIN USER NKEY SEED-----` block), decorated or bare JWT files (`operator:
//! op.jwt`), nkey seed files; reading them as nats does, and writing them.
//!
//! A block is a line with at least three dashes at its start and end (anything between),
//! one line of `[A-Za-z0-9_.=-]+`, and another dash line; CRLF line ends are fine and text
//! may come before a block on its line. This is the pattern
//! `\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\z)))` of jwt
//! v2, matched by hand in linear time. No file I/O here: callers pass the contents.

use nkeys::KeyPair;

use super::decode::{decode_any, AnyClaims};
use super::error::JwtError;

/// The lines of `s`: `(text, has_newline)`; the text excludes the `\n`.
fn lines(s: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        match rest.find('\n') {
            Some(i) => {
                out.push((rest.get(..i).unwrap_or_default(), true));
                rest = rest.get(i + 1..).unwrap_or_default();
            }
            None => {
                out.push((rest, false));
                rest = "";
            }
        }
    }
    out
}

/// A header line: after dropping one trailing `\r`, it ends with `---` and holds a `---`
/// that starts at least six bytes before its end (the block may start mid-line).
fn is_header_line(line: &str) -> bool {
    let a = line.strip_suffix('\r').unwrap_or(line);
    if !a.ends_with("---") || a.len() < 6 {
        return false;
    }
    let last_start = a.len() - 6;
    a.as_bytes().windows(3).take(last_start + 1).any(|w| w == b"---")
}

/// A footer line: starts and ends with `---`, at least six bytes; a trailing `\r` is
/// dropped first only when a `\n` follows (`(\r?\n|\z)`).
fn is_footer_line(line: &str, newline_follows: bool) -> bool {
    let a = if newline_follows {
        line.strip_suffix('\r').unwrap_or(line)
    } else {
        line
    };
    a.len() >= 6 && a.starts_with("---") && a.ends_with("---")
}

fn is_body_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'=')
}

/// The contents of every decorated block, in order.
pub fn decorated_blocks(contents: &str) -> Vec<&str> {
    let ls = lines(contents);
    let mut out = Vec::new();
    let mut k = 0;
    while k < ls.len() {
        let found = match (ls.get(k), ls.get(k + 1), ls.get(k + 2)) {
            (Some(&(head, true)), Some(&(body, true)), Some(&(foot, foot_nl))) => {
                let body = body.strip_suffix('\r').unwrap_or(body);
                let ok = is_header_line(head)
                    && !body.is_empty()
                    && body.bytes().all(is_body_char)
                    && is_footer_line(foot, foot_nl);
                ok.then_some(body)
            }
            _ => None,
        };
        match found {
            Some(body) => {
                out.push(body);
                k += 3;
            }
            None => k += 1,
        }
    }
    out
}

/// The JWT of a decorated file (its first block), or the whole contents when there is no
/// block (a bare JWT file; the decoder skips a trailing newline). `ParseDecoratedJWT`.
pub fn parse_decorated_jwt(contents: &str) -> &str {
    decorated_blocks(contents).first().copied().unwrap_or(contents)
}

/// The key pair of a creds or seed file: the second block, else the first line that
/// starts with `SO`, `SA` or `SU` after trimming. `ParseDecoratedNKey`.
pub fn parse_decorated_nkey(contents: &str) -> Result<KeyPair, JwtError> {
    let blocks = decorated_blocks(contents);
    let seed = match blocks.get(1) {
        Some(s) => *s,
        None => contents
            .split('\n')
            .find(|l| ["SO", "SA", "SU"].iter().any(|p| l.trim().starts_with(p)))
            .ok_or(JwtError::NoSeed)?,
    };
    if !["SO", "SA", "SU"].iter().any(|p| seed.starts_with(p)) {
        return Err(JwtError::NotSeed);
    }
    // Go's base32 decoder skips line ends, so a CRLF seed line still reads.
    let seed: String = seed.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    Ok(KeyPair::from_seed(&seed)?)
}

/// Like [`parse_decorated_nkey`] but only a user seed is accepted.
pub fn parse_decorated_user_nkey(contents: &str) -> Result<KeyPair, JwtError> {
    let kp = parse_decorated_nkey(contents)?;
    if !kp.seed()?.starts_with("SU") {
        return Err(JwtError::NotUserSeed);
    }
    Ok(kp)
}

/// `token` in a `-----BEGIN NATS <KIND> JWT-----` block (the kind is the claim type).
pub fn decorate_jwt(token: &str) -> Result<String, JwtError> {
    let claims = decode_any(token)?;
    Ok(format_jwt(claims.claim_type(), token))
}

fn format_jwt(kind: &str, token: &str) -> String {
    let kind = kind.to_uppercase();
    format!("-----BEGIN NATS {kind} JWT-----\n{token}\n------END NATS {kind} JWT------\n\n")
}

/// A seed in its decorated block with the warning text nsc writes.
pub fn decorate_seed(seed: &str) -> Result<String, JwtError> {
    let ts = seed.trim();
    let kind = match ts.get(..2) {
        None => return Err(JwtError::Encode("seed is too short".into())),
        Some("SU") => "USER",
        Some("SA") => "ACCOUNT",
        Some("SO") => "OPERATOR",
        Some(_) => return Err(JwtError::Encode("seed is not an operator, account or user seed".into())),
    };
    Ok(format!(
        "************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\
         \n\
         -----BEGIN {kind} NKEY SEED-----\n\
         {ts}\n\
         ------END {kind} NKEY SEED------\n\
         \n\
         *************************************************************\n"
    ))
}

/// A creds file for a user JWT and the user's seed (`FormatUserConfig`).
pub fn format_user_config(token: &str, seed: &str) -> Result<String, JwtError> {
    let claims = decode_any(token)?;
    let AnyClaims::User(user) = &claims else {
        return Err(JwtError::Encode(format!(
            "{} cannot be serialized as a user config",
            super::json::go_quote(claims.claim_type())
        )));
    };
    if !seed.trim().starts_with("SU") {
        return Err(JwtError::Encode("nkey seed is not an user seed".into()));
    }
    let kp = KeyPair::from_seed(seed)?;
    if kp.public_key() != user.claims.subject {
        return Err(JwtError::Encode("nkey seed does not match the jwt subject".into()));
    }
    Ok(format_jwt("user", token) + &decorate_seed(seed)?)
}
