//! Service latency tracking (export `latency { sampling, subject }`): sampled requests
//! through a service import are timed, and a `io.nats.server.metric.v1.service_latency`
//! event goes to the export's results subject in the exporting account — status 200
//! with the measured times when the first response arrives, 400 for a request without a
//! reply subject, 503 when nobody served it, 504 when no response came within the
//! export's threshold (nats-server's `sendTrackingLatency` and friends).
//!
//! A sampled request's `_R_.` reply ends in `.T`, so the shard where the response is
//! published knows to send the responder's details along to the shard owning the
//! mapping (mesh record `RespInfo`).

use super::ShardCore;
use crate::core::accounts::links::LatencyTracking;
use crate::core::accounts::state::{ResponseMap, Tracking};
use crate::proto::client_info::ClientInfo;
#[cfg(test)]
use crate::proto::headers;
use crate::proto::{gojson, gotime};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

/// The event type of latency results.
pub const SERVICE_LATENCY_TYPE: &str = "io.nats.server.metric.v1.service_latency";

#[derive(Serialize)]
struct ServiceLatency<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    id: String,
    timestamp: String,
    status: u16,
    #[serde(rename = "description", skip_serializing_if = "str::is_empty")]
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    requestor: Option<&'a ClientInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    responder: Option<&'a ClientInfo>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    header: BTreeMap<&'a str, Vec<&'a str>>,
    start: String,
    service: i64,
    system: i64,
    total: i64,
}

/// A 22-character event id (nats-server uses a nuid).
fn event_id(r: &mut u64) -> String {
    const B62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(22);
    for i in 0..22 {
        if i % 10 == 0 {
            *r = r
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
        }
        let v = (*r >> (6 * (i % 10))) % 62;
        out.push(char::from(B62[v as usize]));
    }
    out
}

/// The value of a header, looked up case-insensitively as Go's `http.Header` does.
fn header_value<'a>(hdr: &'a [u8], key: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(hdr).ok()?;
    text.split("\r\n").skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(key).then(|| v.trim())
    })
}

/// Should this request be measured? `Some(trigger headers)` when yes (empty unless a
/// header decided). nats-server's `shouldSample`.
pub fn sample(l: &LatencyTracking, hdr: Option<&[u8]>, rand: u64) -> Option<Vec<(String, String)>> {
    if l.sampling >= 100 {
        return Some(Vec::new());
    }
    if l.sampling > 0 && (rand % 100) as u8 <= l.sampling {
        return Some(Vec::new());
    }
    let h = hdr?;
    let pick = |keys: &[&str]| -> Vec<(String, String)> {
        keys.iter()
            .filter_map(|k| header_value(h, k).map(|v| (canonical(k), v.to_string())))
            .collect()
    };
    if let Some(t) = header_value(h, "Uber-Trace-Id") {
        let tk: Vec<&str> = t.split(':').collect();
        let flag = tk.get(3).copied().unwrap_or_default();
        let sampled = tk.len() == 4
            && !flag.is_empty()
            && flag.len() <= 2
            && u8::from_str_radix(flag, 16).is_ok_and(|v| v & 1 == 1);
        return sampled.then(|| pick(&["Uber-Trace-Id"]));
    }
    if let Some(s) = header_value(h, "X-B3-Sampled") {
        return (s == "1").then(|| {
            pick(&[
                "X-B3-TraceId",
                "X-B3-SpanId",
                "X-B3-ParentSpanId",
                "X-B3-Sampled",
                "X-B3-Flags",
            ])
        });
    }
    if header_value(h, "X-B3-TraceId").is_some() {
        return Some(pick(&[
            "X-B3-TraceId",
            "X-B3-SpanId",
            "X-B3-ParentSpanId",
            "X-B3-Sampled",
            "X-B3-Flags",
        ]));
    }
    if let Some(b3) = header_value(h, "B3") {
        let tk: Vec<&str> = b3.split('-').collect();
        if (tk.len() > 2 && tk.get(2) == Some(&"0")) || (tk.len() == 1 && tk.first() == Some(&"0")) {
            return None;
        }
        return Some(pick(&["B3"]));
    }
    if let Some(t) = header_value(h, "Traceparent") {
        let tk: Vec<&str> = t.split('-').collect();
        let flag = tk.get(3).copied().unwrap_or_default();
        let sampled = tk.len() == 4 && flag.len() == 2 && u8::from_str_radix(flag, 16).is_ok_and(|v| v & 1 == 1);
        return sampled.then(|| pick(&["Traceparent", "Tracestate"]));
    }
    None
}

/// Go's `textproto.CanonicalMIMEHeaderKey` for the keys above.
fn canonical(k: &str) -> String {
    k.split('-')
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

impl ShardCore {
    /// Report a latency result for `t` in its exporting account.
    #[allow(clippy::too_many_arguments)]
    fn report_latency(
        &mut self,
        t: &Tracking,
        status: u16,
        error: &str,
        responder: Option<&ClientInfo>,
        service: Duration,
        total: Duration,
        system: Duration,
    ) {
        let requestor = self.client_info(t.requester, t.share);
        let req_rtt = requestor.as_ref().map_or(0, |r| r.rtt);
        let start = t.wall_start - Duration::from_nanos(req_rtt.max(0) as u64);
        let mut header: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (k, v) in &t.header {
            header.entry(k.as_str()).or_default().push(v.as_str());
        }
        let mut r = self.next_rand();
        let ev = ServiceLatency {
            kind: SERVICE_LATENCY_TYPE,
            id: event_id(&mut r),
            timestamp: gotime::rfc3339_nano(SystemTime::now()),
            status,
            error,
            requestor: requestor.as_ref(),
            responder,
            header,
            start: gotime::rfc3339_nano(start),
            service: gotime::duration_nanos(service),
            system: gotime::duration_nanos(system),
            total: gotime::duration_nanos(total),
        };
        let body = gojson::to_vec(&ev);
        let subject = t.subject.clone();
        self.publish_later(t.exporter, &subject, body);
    }

    /// A request sampled for tracking went nowhere (400 without a reply, 503 without a
    /// responder).
    pub(super) fn latency_failed(&mut self, t: &Tracking, status: u16) {
        let error = if status == 400 {
            "Bad Request"
        } else {
            "Service Unavailable"
        };
        self.report_latency(t, status, error, None, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    }

    /// The first response of a tracked request arrived (here, where its mapping lives).
    pub(super) fn latency_measured(&mut self, map: &ResponseMap, responder: Option<&ClientInfo>, now: Instant) {
        let Some(t) = map.tracking.as_deref() else { return };
        let service_rtt = now.saturating_duration_since(map.started);
        let resp_rtt = Duration::from_nanos(responder.map_or(0, |r| r.rtt.max(0) as u64));
        let req_rtt = self.client(t.requester).and_then(|c| c.rtt).unwrap_or(Duration::ZERO);
        let service = service_rtt.saturating_sub(resp_rtt);
        let total = req_rtt + service_rtt;
        self.report_latency(t, 200, "", responder, service, total, Duration::ZERO);
    }

    /// A tracked request got no response within its threshold.
    pub(super) fn latency_timed_out(&mut self, t: &Tracking) {
        self.report_latency(
            t,
            504,
            "Service Timeout",
            None,
            Duration::ZERO,
            Duration::ZERO,
            Duration::ZERO,
        );
    }
}

/// Does this `_R_.` subject belong to a sampled request?
pub fn is_tracked_reply(subject: &[u8]) -> bool {
    subject.ends_with(b".T")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_header(key: &str, value: &str) -> Vec<u8> {
        headers::with(None, key, value)
    }

    fn lt(sampling: u8) -> LatencyTracking {
        LatencyTracking {
            sampling,
            subject: "lat".into(),
        }
    }

    #[test]
    fn sampling_by_percent_and_by_headers() {
        assert!(sample(&lt(100), None, 7).is_some());
        assert!(sample(&lt(0), None, 7).is_none());
        let h = with_header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let got = sample(&lt(0), Some(&h), 7).unwrap();
        assert_eq!(got[0].0, "Traceparent");
        let h = with_header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!(sample(&lt(0), Some(&h), 7).is_none());
        let h = with_header("X-B3-Sampled", "0");
        assert!(sample(&lt(0), Some(&h), 7).is_none());
        let h = with_header("Uber-Trace-Id", "479fefe9525eddb:5adb976bfc1f95c1:479fefe9525eddb:1");
        assert!(sample(&lt(0), Some(&h), 7).is_some());
        let h = with_header("b3", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-0");
        assert!(sample(&lt(0), Some(&h), 7).is_none());
    }

    #[test]
    fn ids_and_canonical_keys() {
        let mut r = 1;
        let a = event_id(&mut r);
        let b = event_id(&mut r);
        assert_eq!(a.len(), 22);
        assert_ne!(a, b);
        assert_eq!(canonical("x-b3-traceid"), "X-B3-Traceid");
        assert_eq!(canonical("traceparent"), "Traceparent");
    }
}
