//! Unit tests of the key derivation and the sealers (the reference's own files are checked
//! in tests/reference_dir.rs).

use super::*;

fn cfg(key: &str, c: Cipher, prev: Option<&str>) -> EncryptionConfig {
    EncryptionConfig {
        key: key.to_string(),
        cipher: c,
        prev_key: prev.map(str::to_string),
    }
}

#[test]
fn prf_is_hmac_of_info_and_context() {
    // HMAC-SHA256("key", "$G" ‖ "S"), computed independently (RFC 2104 via `openssl`).
    let got = prf("key", "$G", b"S");
    let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "cbfdd4ae374ad44ec4b8d9093797d4231c3748f5eb12b9e96e0ad8138f30edb3");
    assert_eq!(got, prf("key", "$GS", b""));
    assert_ne!(got, prf("key", "$G", b"T"));
}

#[test]
fn key_files_round_trip_rotate_and_convert() {
    for c in [Cipher::ChaCha, Cipher::Aes] {
        let old = StreamKeys::new(&cfg("old", c, None), "$G", "S");
        let (sk, file) = old.new_key_file("S:1");
        assert_eq!(file.len(), c.nonce_len() + 32 + 16);
        assert!(file.len() >= MIN_KEY_FILE);
        let back = old.open_key_file("S:1", &file).unwrap();
        assert_eq!(
            (back.seed, back.rotated, back.nonce.clone()),
            (sk.seed, false, sk.nonce.clone())
        );
        // Another context does not open it.
        assert!(old.open_key_file("S:2", &file).is_err());
        // Rotated: the new key with prev_key opens it and says so.
        let new = StreamKeys::new(&cfg("new", c, Some("old")), "$G", "S");
        let r = new.open_key_file("S:1", &file).unwrap();
        assert!(r.rotated);
        assert_eq!(r.seed, sk.seed);
        // The other cipher configured: converted on open.
        let conv = StreamKeys::new(&cfg("old", c.other(), None), "$G", "S");
        let r = conv.open_key_file("S:1", &file).unwrap();
        assert_eq!((r.cipher, r.rotated), (c, true));
        // Without the key: refused.
        let none = StreamKeys::new(&cfg("new", c, None), "$G", "S");
        assert!(none.open_key_file("S:1", &file).is_err());
        // Short or damaged files are refused, not panicked on.
        assert!(old.open_key_file("S:1", &file[..40]).is_err());
        let mut bad = file.clone();
        bad[30] ^= 1;
        assert!(old.open_key_file("S:1", &bad).is_err());
    }
}

#[test]
fn meta_and_blocks() {
    let keys = StreamKeys::new(&cfg("k", Cipher::ChaCha, None), "ACC", "S");
    let (sk, meta_key) = keys.new_key_file(&keys.meta_context());
    let meta = sk.aead().seal(br#"{"name":"S"}"#);
    let (plain, _) = keys.open_meta(&meta_key, &meta).unwrap();
    assert_eq!(plain, br#"{"name":"S"}"#);
    // The block stream is an XOR from offset 0: twice is the identity, and a prefix
    // decrypts alone.
    let mut buf = b"hello world, this is a block".to_vec();
    sk.xor_block(&mut buf).unwrap();
    assert_ne!(&buf[..], b"hello world, this is a block");
    let mut head = buf[..5].to_vec();
    sk.xor_block(&mut head).unwrap();
    assert_eq!(&head, b"hello");
    sk.xor_block(&mut buf).unwrap();
    assert_eq!(&buf[..], b"hello world, this is a block");
}

#[test]
fn block_crypter() {
    for c in [Cipher::ChaCha, Cipher::Aes] {
        let old = StreamKeys::new(&cfg("a", c, None), "$G", "S");
        let b = old.block_cipher(7);
        let sealed = b.seal(b"records");
        assert_eq!(sealed.len(), 7 + b.overhead());
        assert_eq!(b.open(&sealed).unwrap(), b"records");
        assert!(!b.opened_with_prev());
        // Another block's key does not open it.
        assert!(old.block_cipher(8).open(&sealed).is_err());
        let mut bad = sealed.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(b.open(&bad).is_err());
        assert!(b.open(&sealed[..3]).is_err());
        // After a rotation the previous key still opens it.
        let new = StreamKeys::new(&cfg("b", c, Some("a")), "$G", "S").block_cipher(7);
        assert_eq!(new.open(&sealed).unwrap(), b"records");
        assert!(new.opened_with_prev());
    }
}

#[test]
fn cipher_names() {
    assert_eq!(Cipher::parse("ChaChaPoly").unwrap(), Cipher::ChaCha);
    assert_eq!(Cipher::parse("chacha").unwrap(), Cipher::ChaCha);
    assert_eq!(Cipher::parse("AES").unwrap(), Cipher::Aes);
    assert!(Cipher::parse("des").is_err());
}

#[test]
fn record_sealer() {
    fn sync_send<T: Send + Sync>(_: &T) {}
    for c in [Cipher::ChaCha, Cipher::Aes] {
        let old = StreamKeys::new(&cfg("a", c, None), "$G", "S").record_sealer();
        sync_send(&old);
        let mut buf = b"headers and payload".to_vec();
        old.seal_at(7, 4096, &mut buf).unwrap();
        assert_eq!(buf.len(), 19 + TAG_LEN);
        assert!(!buf.windows(7).any(|w| w == b"payload"));
        let sealed = buf.clone();
        old.open_at(7, 4096, &mut buf).unwrap();
        assert_eq!(buf, b"headers and payload");
        // Another position, another stream or a damaged byte: refused, buffer untouched.
        for (f, o) in [(7u64, 4097u64), (8, 4096)] {
            let mut b = sealed.clone();
            assert!(old.open_at(f, o, &mut b).is_err());
            assert_eq!(b, sealed);
        }
        let other = StreamKeys::new(&cfg("a", c, None), "$G", "T").record_sealer();
        assert!(other.open_at(7, 4096, &mut sealed.clone()).is_err());
        let mut b = sealed.clone();
        b[3] ^= 1;
        assert!(old.open_at(7, 4096, &mut b).is_err());
        assert!(old.open_at(7, 4096, &mut vec![1, 2, 3]).is_err());
        // Rotation: the previous key opens it, and says so.
        let new = StreamKeys::new(&cfg("b", c, Some("a")), "$G", "S").record_sealer();
        let mut b = sealed.clone();
        new.open_at(7, 4096, &mut b).unwrap();
        assert_eq!(b, b"headers and payload");
        assert!(new.opened_with_prev());
        // Deterministic: the same position and bytes seal the same way.
        let mut again = b"headers and payload".to_vec();
        old.seal_at(7, 4096, &mut again).unwrap();
        assert_eq!(again, sealed);
    }
}
