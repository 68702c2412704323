//! The consumer's advisories and its ack metric, as nats-server publishes them: JSON with
//! the `type` / `id` / `timestamp` event fields first, sent only when someone listens.

use super::engine::Consumer;
use super::ConsumerEnv;
use crate::jetstream::api::GoTime;
use serde_json::{json, Map, Value};

const PRE: &str = "$JS.EVENT.ADVISORY.CONSUMER";

impl Consumer {
    fn advise(&mut self, env: &mut dyn ConsumerEnv, kind: &str, typ: &str, fields: Value) {
        let subject = if kind == "ACK" {
            format!("$JS.EVENT.METRIC.CONSUMER.ACK.{}.{}", self.stream, self.name)
        } else {
            format!("{PRE}.{kind}.{}.{}", self.stream, self.name)
        };
        if !env.has_interest(&subject) {
            return;
        }
        let mut m = Map::new();
        m.insert("type".into(), Value::from(typ));
        m.insert("id".into(), Value::from(self.nuid.next_id()));
        m.insert("timestamp".into(), Value::from(GoTime(env.now_ns()).format()));
        if let Value::Object(f) = fields {
            for (k, v) in f {
                let empty_domain = k == "domain" && v.as_str() == Some("");
                let empty_account = k == "account" && v.as_str() == Some("");
                if !empty_domain && !empty_account {
                    m.insert(k, v);
                }
            }
        }
        if let Ok(body) = serde_json::to_vec(&Value::Object(m)) {
            env.publish(&subject, "", None, &body);
        }
    }

    pub(super) fn max_deliveries_advisory(&mut self, env: &mut dyn ConsumerEnv, sseq: u64, deliveries: u64) {
        let f = json!({"stream": self.stream, "consumer": self.name, "stream_seq": sseq,
            "deliveries": deliveries, "domain": self.domain});
        self.advise(env, "MAX_DELIVERIES", "io.nats.jetstream.advisory.v1.max_deliver", f);
    }

    pub(super) fn nak_advisory(&mut self, env: &mut dyn ConsumerEnv, sseq: u64, dseq: u64, dc: u64) {
        let f = json!({"stream": self.stream, "consumer": self.name, "consumer_seq": dseq,
            "stream_seq": sseq, "deliveries": dc, "domain": self.domain});
        self.advise(env, "MSG_NAKED", "io.nats.jetstream.advisory.v1.nak", f);
    }

    pub(super) fn terminated_advisory(
        &mut self,
        env: &mut dyn ConsumerEnv,
        sseq: u64,
        dseq: u64,
        dc: u64,
        reason: &str,
    ) {
        let mut f = json!({"stream": self.stream, "consumer": self.name, "consumer_seq": dseq,
            "stream_seq": sseq, "deliveries": dc});
        if let Value::Object(m) = &mut f {
            if !reason.is_empty() {
                m.insert("reason".into(), Value::from(reason));
            }
            m.insert("domain".into(), Value::from(self.domain.as_str()));
        }
        self.advise(env, "MSG_TERMINATED", "io.nats.jetstream.advisory.v1.terminated", f);
    }

    pub(super) fn ack_metric(&mut self, env: &mut dyn ConsumerEnv, sseq: u64, dseq: u64, dc: u64, ack_time: i64) {
        let f = json!({"stream": self.stream, "consumer": self.name, "consumer_seq": dseq,
            "stream_seq": sseq, "ack_time": ack_time, "deliveries": dc, "domain": self.domain});
        self.advise(env, "ACK", "io.nats.jetstream.metric.v1.consumer_ack", f);
    }

    pub(super) fn pause_advisory(&mut self, env: &mut dyn ConsumerEnv) {
        let until = self.cfg.pause_until.unwrap_or(GoTime::ZERO);
        let paused = !until.is_zero() && until.0 > env.now_ns();
        let f = json!({"stream": self.stream, "consumer": self.name, "paused": paused,
            "pause_until": until.format(), "domain": self.domain});
        self.advise(env, "PAUSE", "io.nats.jetstream.advisory.v1.consumer_pause", f);
    }

    pub(super) fn pinned_advisory(&mut self, env: &mut dyn ConsumerEnv, group: &str) {
        let f = json!({"account": self.account, "stream": self.stream, "consumer": self.name,
            "domain": self.domain, "group": group, "pinned_id": self.pin_id});
        self.advise(env, "PINNED", "io.nats.jetstream.advisory.v1.consumer_group_pinned", f);
    }

    pub(super) fn unpinned_advisory(&mut self, env: &mut dyn ConsumerEnv, group: &str, reason: &str) {
        let f = json!({"account": self.account, "stream": self.stream, "consumer": self.name,
            "domain": self.domain, "group": group, "reason": reason});
        self.advise(
            env,
            "UNPINNED",
            "io.nats.jetstream.advisory.v1.consumer_group_unpinned",
            f,
        );
    }
}
