//! The stream API's request bodies (strict, with the Go structs they mirror for error
//! texts) and the direct-get request rules.

use super::decode::{Field, GoRequest, Kind, Schema, INT, UINT64};
use super::time::GoTime;
use serde::Deserialize;

const fn f(json: &'static str, kind: Kind) -> Field {
    Field { json, kind }
}
static PAGED: &[Field] = &[f("offset", Kind::Int(&INT))];

/// `STREAM.INFO` (`JSApiStreamInfoRequest`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamInfoRequest {
    #[serde(deserialize_with = "super::config::null_default")]
    pub offset: i64,
    #[serde(deserialize_with = "super::config::null_default")]
    pub deleted_details: bool,
    #[serde(deserialize_with = "super::config::null_default")]
    pub subjects_filter: String,
}

pub static STREAM_INFO_REQUEST: Schema = Schema {
    name: "JSApiStreamInfoRequest",
    go_type: "server.JSApiStreamInfoRequest",
    fields: &[f("deleted_details", Kind::Bool), f("subjects_filter", Kind::Str)],
    embedded: &[("ApiPagedRequest", PAGED)],
};

impl GoRequest for StreamInfoRequest {
    const SCHEMA: &'static Schema = &STREAM_INFO_REQUEST;
}

/// `STREAM.NAMES`/`STREAM.LIST` (`{offset, subject}`) and `CONSUMER.NAMES`/`LIST`
/// (`{offset}`): decode with [`super::decode::decode_as`] and the schema of the API.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NamesRequest {
    #[serde(deserialize_with = "super::config::null_default")]
    pub offset: i64,
    #[serde(deserialize_with = "super::config::null_default")]
    pub subject: String,
}

pub static STREAM_NAMES_REQUEST: Schema = Schema {
    name: "JSApiStreamNamesRequest",
    go_type: "server.JSApiStreamNamesRequest",
    fields: &[f("subject", Kind::Str)],
    embedded: &[("ApiPagedRequest", PAGED)],
};
pub static STREAM_LIST_REQUEST: Schema = Schema {
    name: "JSApiStreamListRequest",
    go_type: "server.JSApiStreamListRequest",
    fields: &[f("subject", Kind::Str)],
    embedded: &[("ApiPagedRequest", PAGED)],
};
pub static CONSUMERS_REQUEST: Schema = Schema {
    name: "JSApiConsumersRequest",
    go_type: "server.JSApiConsumersRequest",
    fields: &[],
    embedded: &[("ApiPagedRequest", PAGED)],
};

/// `STREAM.PURGE` (`JSApiStreamPurgeRequest`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PurgeRequest {
    #[serde(deserialize_with = "super::config::null_default")]
    pub filter: String,
    #[serde(deserialize_with = "super::config::null_default")]
    pub seq: u64,
    #[serde(deserialize_with = "super::config::null_default")]
    pub keep: u64,
}

pub static PURGE_REQUEST: Schema = Schema {
    name: "JSApiStreamPurgeRequest",
    go_type: "server.JSApiStreamPurgeRequest",
    fields: &[
        f("seq", Kind::Int(&UINT64)),
        f("filter", Kind::Str),
        f("keep", Kind::Int(&UINT64)),
    ],
    embedded: &[],
};
impl GoRequest for PurgeRequest {
    const SCHEMA: &'static Schema = &PURGE_REQUEST;
}

/// `STREAM.MSG.GET` and direct get (`JSApiMsgGetRequest`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MsgGetRequest {
    #[serde(deserialize_with = "super::config::null_default")]
    pub seq: u64,
    #[serde(deserialize_with = "super::config::null_default")]
    pub last_by_subj: String,
    #[serde(deserialize_with = "super::config::null_default")]
    pub next_by_subj: String,
    #[serde(deserialize_with = "super::config::null_default")]
    pub batch: i64,
    #[serde(deserialize_with = "super::config::null_default")]
    pub max_bytes: i64,
    pub start_time: Option<GoTime>,
    #[serde(deserialize_with = "super::config::null_default")]
    pub multi_last: Vec<String>,
    #[serde(deserialize_with = "super::config::null_default")]
    pub up_to_seq: u64,
    pub up_to_time: Option<GoTime>,
    #[serde(deserialize_with = "super::config::null_default")]
    pub no_hdr: bool,
}

pub static MSG_GET_REQUEST: Schema = Schema {
    name: "JSApiMsgGetRequest",
    go_type: "server.JSApiMsgGetRequest",
    fields: &[
        f("seq", Kind::Int(&UINT64)),
        f("last_by_subj", Kind::Str),
        f("next_by_subj", Kind::Str),
        f("batch", Kind::Int(&INT)),
        f("max_bytes", Kind::Int(&INT)),
        f("start_time", Kind::Time),
        f("multi_last", Kind::Slice("[]string", &Kind::Str)),
        f("up_to_seq", Kind::Int(&UINT64)),
        f("up_to_time", Kind::Time),
        f("no_hdr", Kind::Bool),
    ],
    embedded: &[],
};
impl GoRequest for MsgGetRequest {
    const SCHEMA: &'static Schema = &MSG_GET_REQUEST;
}

/// `STREAM.MSG.DELETE` (`JSApiMsgDeleteRequest`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MsgDeleteRequest {
    #[serde(deserialize_with = "super::config::null_default")]
    pub seq: u64,
    #[serde(deserialize_with = "super::config::null_default")]
    pub no_erase: bool,
}

pub static MSG_DELETE_REQUEST: Schema = Schema {
    name: "JSApiMsgDeleteRequest",
    go_type: "server.JSApiMsgDeleteRequest",
    fields: &[f("seq", Kind::Int(&UINT64)), f("no_erase", Kind::Bool)],
    embedded: &[],
};
impl GoRequest for MsgDeleteRequest {
    const SCHEMA: &'static Schema = &MSG_DELETE_REQUEST;
}

/// A direct get refused before lookup: the status line of the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectGetRefusal {
    /// `408 Empty Request`
    Empty,
    /// `408 Malformed Request`
    Malformed,
    /// `408 Bad Request`
    Bad,
}

impl DirectGetRefusal {
    /// The status message (`NATS/1.0 <this>`).
    pub fn status(self) -> &'static str {
        match self {
            DirectGetRefusal::Empty => "408 Empty Request",
            DirectGetRefusal::Malformed => "408 Malformed Request",
            DirectGetRefusal::Bad => "408 Bad Request",
        }
    }
}

/// `$JS.API.DIRECT.GET.<S>` with a body: decoded leniently (Go's `json.Unmarshal`) and the
/// field combinations the reference refuses.
pub fn direct_get_request(body: &[u8]) -> Result<MsgGetRequest, DirectGetRefusal> {
    if body.is_empty() {
        return Err(DirectGetRefusal::Empty);
    }
    let r: MsgGetRequest =
        super::decode::unmarshal_lenient(body, &MSG_GET_REQUEST).map_err(|_| DirectGetRefusal::Malformed)?;
    let last = !r.last_by_subj.is_empty();
    let next = !r.next_by_subj.is_empty();
    let multi = !r.multi_last.is_empty();
    let start = r.start_time.is_some();
    if r.seq == 0 && !last && !next && !multi && !start {
        return Err(DirectGetRefusal::Empty);
    }
    // The combinations the reference refuses, in its order.
    let refused = [
        r.seq > 0 && last,
        r.seq > 0 && start,
        start && last,
        last && next,
        last && r.batch > 0,
        last && multi,
        next && multi,
        r.up_to_seq > 0 && r.up_to_time.is_some(),
    ];
    if refused.contains(&true) {
        return Err(DirectGetRefusal::Bad);
    }
    Ok(r)
}

/// `$JS.API.DIRECT.GET.<S>.<subject...>`: the last message on the subject tokens after the
/// stream name; the body, if any, must not ask for anything else.
pub fn direct_get_last_by_subject(subject: &str, body: &[u8]) -> Result<MsgGetRequest, DirectGetRefusal> {
    let mut r = if body.is_empty() {
        MsgGetRequest::default()
    } else {
        super::decode::unmarshal_lenient(body, &MSG_GET_REQUEST).map_err(|_| DirectGetRefusal::Malformed)?
    };
    // `$JS.API.DIRECT.GET.<S>.` then the key.
    let key = subject.splitn(6, '.').nth(5).unwrap_or("");
    if key.is_empty() {
        return Err(DirectGetRefusal::Bad);
    }
    if !r.last_by_subj.is_empty()
        || !r.next_by_subj.is_empty()
        || !r.multi_last.is_empty()
        || r.seq != 0
        || r.batch != 0
        || r.start_time.is_some()
        || r.up_to_seq != 0
        || r.up_to_time.is_some()
    {
        return Err(DirectGetRefusal::Bad);
    }
    r.last_by_subj = key.to_string();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::decode::{decode, decode_as, decode_optional};

    /// Texts observed from the reference.
    #[test]
    fn request_errors_match_the_reference() {
        let e = decode_optional::<StreamInfoRequest>(br#"{"offset":"x"}"#).unwrap_err();
        assert_eq!(e.description, "invalid JSON: json: cannot unmarshal string into Go struct field JSApiStreamInfoRequest.ApiPagedRequest.offset of type int");
        let e = decode_as::<NamesRequest>(br#"{"offset":"x"}"#, &STREAM_NAMES_REQUEST).unwrap_err();
        assert_eq!(e.description, "invalid JSON: json: cannot unmarshal string into Go struct field JSApiStreamNamesRequest.ApiPagedRequest.offset of type int");
        let e = decode_as::<NamesRequest>(br#"{"subject":1}"#, &STREAM_LIST_REQUEST).unwrap_err();
        assert_eq!(e.description, "invalid JSON: json: cannot unmarshal number into Go struct field JSApiStreamListRequest.subject of type string");
        let e = decode::<PurgeRequest>(br#"{"seq":"x"}"#).unwrap_err();
        assert_eq!(e.description, "invalid JSON: json: cannot unmarshal string into Go struct field JSApiStreamPurgeRequest.seq of type uint64");
        let e = decode::<MsgGetRequest>(br#"{"start_time":"x"}"#).unwrap_err();
        assert_eq!(
            e.description,
            r#"invalid JSON: parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006""#
        );
        let e = decode::<MsgDeleteRequest>(br#"{"seq":"x"}"#).unwrap_err();
        assert_eq!(
            e.description,
            "invalid JSON: json: cannot unmarshal string into Go struct field JSApiMsgDeleteRequest.seq of type uint64"
        );
        let e = decode_optional::<StreamInfoRequest>(br#"{"foo":1}"#).unwrap_err();
        assert_eq!(e.description, r#"invalid JSON: json: unknown field "foo""#);
        let r = decode_optional::<StreamInfoRequest>(b"").unwrap();
        assert_eq!(r, StreamInfoRequest::default());
        let r = decode::<PurgeRequest>(br#"{"filter":"a.*","keep":3}"#).unwrap();
        assert_eq!((r.filter.as_str(), r.keep), ("a.*", 3));
    }

    #[test]
    fn direct_get_rules() {
        use DirectGetRefusal::*;
        let cases: &[(&str, Result<(), DirectGetRefusal>)] = &[
            ("", Err(Empty)),
            ("{}", Err(Empty)),
            ("{", Err(Malformed)),
            (r#"{"seq":1}"#, Ok(())),
            (r#"{"seq":1,"unknown":2}"#, Ok(())),
            (r#"{"seq":1,"last_by_subj":"a"}"#, Err(Bad)),
            (r#"{"last_by_subj":"a","next_by_subj":"b"}"#, Err(Bad)),
            (r#"{"last_by_subj":"a","batch":2}"#, Err(Bad)),
            (r#"{"next_by_subj":"a","multi_last":["b"]}"#, Err(Bad)),
            (
                r#"{"multi_last":["b"],"up_to_seq":2,"up_to_time":"2026-01-01T00:00:00Z"}"#,
                Err(Bad),
            ),
            (r#"{"start_time":"2026-01-01T00:00:00Z","batch":5}"#, Ok(())),
            (r#"{"seq":"x"}"#, Err(Malformed)),
        ];
        for (body, want) in cases {
            assert_eq!(direct_get_request(body.as_bytes()).map(|_| ()), *want, "{body}");
        }
        let r = direct_get_last_by_subject("$JS.API.DIRECT.GET.KV_b.$KV.b.k1", b"").unwrap();
        assert_eq!(r.last_by_subj, "$KV.b.k1");
        assert_eq!(
            direct_get_last_by_subject("$JS.API.DIRECT.GET.S", b"").unwrap_err(),
            Bad
        );
        assert_eq!(
            direct_get_last_by_subject("$JS.API.DIRECT.GET.S.a", br#"{"seq":1}"#).unwrap_err(),
            Bad
        );
    }
}
