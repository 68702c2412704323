//! A small DER reader: tag-length-value items over a borrowed slice, for the few X.509
//! structures the server reads itself (subject names, subject alternative names, the
//! public key, OCSP responses). Lengths are checked against the bytes present before
//! anything is sliced, so a claimed length never allocates or reads past the input.

#![deny(clippy::indexing_slicing, clippy::unwrap_used)]

/// Malformed DER.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed DER")]
pub struct DerError;

pub const SEQUENCE: u8 = 0x30;
pub const SET: u8 = 0x31;
pub const OID: u8 = 0x06;
pub const INTEGER: u8 = 0x02;
pub const BOOLEAN: u8 = 0x01;
pub const OCTET_STRING: u8 = 0x04;
pub const BIT_STRING: u8 = 0x03;
pub const ENUMERATED: u8 = 0x0a;
pub const GENERALIZED_TIME: u8 = 0x18;
pub const NULL: u8 = 0x05;

/// One item: its tag, its content and the whole encoding (tag and length included).
#[derive(Debug, Clone, Copy)]
pub struct Tlv<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub raw: &'a [u8],
}

impl<'a> Tlv<'a> {
    /// The items inside a constructed value.
    pub fn reader(&self) -> Reader<'a> {
        Reader::new(self.content)
    }

    /// Fail unless the tag is `tag`.
    pub fn expect(self, tag: u8) -> Result<Tlv<'a>, DerError> {
        if self.tag == tag {
            Ok(self)
        } else {
            Err(DerError)
        }
    }
}

/// Reads consecutive items.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { rest: data }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The tag of the next item, if any.
    pub fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next item.
    pub fn next_tlv(&mut self) -> Result<Tlv<'a>, DerError> {
        let (&tag, after) = self.rest.split_first().ok_or(DerError)?;
        if tag & 0x1f == 0x1f {
            // High tag numbers do not occur in the structures read here.
            return Err(DerError);
        }
        let (&first, mut after) = after.split_first().ok_or(DerError)?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 {
                return Err(DerError);
            }
            let (bytes, rest) = after.split_at_checked(n).ok_or(DerError)?;
            after = rest;
            bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
        };
        let content = after.get(..len).ok_or(DerError)?;
        let header = self.rest.len() - after.len();
        let raw = self.rest.get(..header + len).ok_or(DerError)?;
        self.rest = after.get(len..).ok_or(DerError)?;
        Ok(Tlv { tag, content, raw })
    }

    /// The next item, which must have tag `tag`.
    pub fn expect(&mut self, tag: u8) -> Result<Tlv<'a>, DerError> {
        self.next_tlv()?.expect(tag)
    }

    /// The next item if it has tag `tag`.
    pub fn optional(&mut self, tag: u8) -> Result<Option<Tlv<'a>>, DerError> {
        if self.peek_tag() == Some(tag) {
            self.next_tlv().map(Some)
        } else {
            Ok(None)
        }
    }
}

/// An OBJECT IDENTIFIER's content in dotted form (`2.5.4.3`).
pub fn oid_string(content: &[u8]) -> Result<String, DerError> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut cur: u64 = 0;
    let mut pending = false;
    for &b in content {
        if cur > (u64::MAX >> 7) {
            return Err(DerError);
        }
        cur = (cur << 7) | u64::from(b & 0x7f);
        pending = true;
        if b & 0x80 == 0 {
            arcs.push(cur);
            cur = 0;
            pending = false;
        }
    }
    if pending || arcs.is_empty() {
        return Err(DerError);
    }
    let mut out = String::new();
    for (i, a) in arcs.iter().enumerate() {
        if i == 0 {
            let (x, y) = match *a {
                a if a < 40 => (0, a),
                a if a < 80 => (1, a - 40),
                a => (2, a - 80),
            };
            out.push_str(&format!("{x}.{y}"));
        } else {
            out.push('.');
            out.push_str(&a.to_string());
        }
    }
    Ok(out)
}

/// Encode a tag-length-value item (for the requests the server builds itself).
pub fn encode(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = (len as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        let used = bytes.get(skip..).unwrap_or_default();
        out.push(0x80 | used.len() as u8);
        out.extend_from_slice(used);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn reads_nested_items_and_rejects_short_input() {
        let inner = encode(OID, &[0x55, 0x04, 0x03]);
        let seq = encode(SEQUENCE, &inner);
        let mut r = Reader::new(&seq);
        let s = r.expect(SEQUENCE).unwrap();
        assert!(r.is_empty());
        let oid = s.reader().expect(OID).unwrap();
        assert_eq!(oid_string(oid.content).unwrap(), "2.5.4.3");
        // A claimed length beyond the input.
        assert_eq!(
            Reader::new(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff])
                .next_tlv()
                .unwrap_err(),
            DerError
        );
        assert_eq!(Reader::new(&[0x30, 0x05, 0x01]).next_tlv().unwrap_err(), DerError);
        assert_eq!(Reader::new(&[0x30]).next_tlv().unwrap_err(), DerError);
    }

    #[test]
    fn long_lengths_round_trip() {
        let body = vec![7u8; 300];
        let enc = encode(OCTET_STRING, &body);
        assert_eq!(enc.get(..4), Some(&[0x04, 0x82, 0x01, 0x2c][..]));
        let t = Reader::new(&enc).next_tlv().unwrap();
        assert_eq!(t.content.len(), 300);
        assert_eq!(t.raw.len(), enc.len());
    }

    #[test]
    fn oids() {
        assert_eq!(
            oid_string(&[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19]).unwrap(),
            "0.9.2342.19200300.100.1.25"
        );
        assert_eq!(
            oid_string(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]).unwrap(),
            "1.2.840.113549.1.9.1"
        );
        assert!(oid_string(&[0x86]).is_err());
        assert!(oid_string(&[]).is_err());
    }
}
