//! Public nkey kinds: which kind of key a string is (operator `O…`, account `A…`, user
//! `U…`, server `N…`, cluster `C…`, curve `X…`), checked by decoding it (base32, CRC,
//! prefix byte) like Go's `nkeys.IsValidPublic*Key`.

/// The kind of a valid public nkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Operator,
    Account,
    User,
    Server,
    Cluster,
    Curve,
    Module,
    Service,
}

impl KeyKind {
    /// The name nkeys gives the prefix (`operator`, `account`, ...), as in Go error texts.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Operator => "operator",
            KeyKind::Account => "account",
            KeyKind::User => "user",
            KeyKind::Server => "server",
            KeyKind::Cluster => "cluster",
            KeyKind::Curve => "curve",
            KeyKind::Module => "module",
            KeyKind::Service => "service",
        }
    }
}

/// The kind of `key` if it is a well-formed public nkey (right length, base32, CRC, known
/// public prefix), else `None`.
pub fn key_kind(key: &str) -> Option<KeyKind> {
    nkeys::from_public_key(key).ok()?;
    // The prefix byte is the top five bits of the first byte, so the first character names
    // the kind.
    match key.as_bytes().first()? {
        b'O' => Some(KeyKind::Operator),
        b'A' => Some(KeyKind::Account),
        b'U' => Some(KeyKind::User),
        b'N' => Some(KeyKind::Server),
        b'C' => Some(KeyKind::Cluster),
        b'X' => Some(KeyKind::Curve),
        b'M' => Some(KeyKind::Module),
        b'V' => Some(KeyKind::Service),
        _ => None,
    }
}

/// `nkeys.IsValidPublicOperatorKey`.
pub fn is_operator_key(key: &str) -> bool {
    key_kind(key) == Some(KeyKind::Operator)
}

/// `nkeys.IsValidPublicAccountKey`.
pub fn is_account_key(key: &str) -> bool {
    key_kind(key) == Some(KeyKind::Account)
}

/// `nkeys.IsValidPublicUserKey`.
pub fn is_user_key(key: &str) -> bool {
    key_kind(key) == Some(KeyKind::User)
}

/// `nkeys.IsValidPublicServerKey`.
pub fn is_server_key(key: &str) -> bool {
    key_kind(key) == Some(KeyKind::Server)
}

/// `nkeys.IsValidPublicCurveKey`.
pub fn is_curve_key(key: &str) -> bool {
    key_kind(key) == Some(KeyKind::Curve)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nkeys::KeyPair;

    #[test]
    fn kinds_of_generated_keys() {
        let cases = [
            (KeyPair::new_operator().public_key(), KeyKind::Operator),
            (KeyPair::new_account().public_key(), KeyKind::Account),
            (KeyPair::new_user().public_key(), KeyKind::User),
            (KeyPair::new_server().public_key(), KeyKind::Server),
            (KeyPair::new_cluster().public_key(), KeyKind::Cluster),
            (nkeys::XKey::new().public_key(), KeyKind::Curve),
        ];
        for (key, kind) in cases {
            assert_eq!(key_kind(&key), Some(kind), "{key}");
        }
    }

    #[test]
    fn malformed_keys_have_no_kind() {
        let acc = KeyPair::new_account().public_key();
        let mut flipped = acc.clone().into_bytes();
        if let Some(b) = flipped.get_mut(10) {
            *b = if *b == b'A' { b'B' } else { b'A' };
        }
        let flipped = String::from_utf8(flipped).unwrap_or_default();
        for bad in [
            "",
            "A",
            "*",
            &acc[1..],
            &flipped,
            &KeyPair::new_user().seed().unwrap_or_default(),
        ] {
            assert_eq!(key_kind(bad), None, "{bad}");
        }
        assert!(is_account_key(&acc) && !is_user_key(&acc) && !is_operator_key(&acc));
    }
}
