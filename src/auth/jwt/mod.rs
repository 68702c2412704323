//! NATS JWT v2 claims: decoding, verification and encoding.
