//! Stream and consumer configurations as the JetStream API carries them (nats-server's
//! `StreamConfig` and `ConsumerConfig` JSON: field names, omitempty rules, enum strings,
//! durations in nanoseconds, times in RFC 3339).
//!
//! Decoding is strict (unknown fields refused, as `jetstream.strict` does by default);
//! `null` reads as the field's zero value, as Go's decoder does.

use super::time::GoTime;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// `null` decodes as the type's default (Go leaves the zero value).
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

pub(crate) fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
pub(crate) fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

/// An enum carried as a lowercase string; the first variant is the zero value.
macro_rules! go_enum {
    ($(#[$m:meta])* $name:ident { $first:ident = $ftext:literal $(, $variant:ident = $text:literal)* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            #[default]
            $first,
            $($variant),*
        }
        impl $name {
            /// The JSON string of this value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $name::$first => $ftext,
                    $($name::$variant => $text),*
                }
            }
            /// Parse the JSON string.
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $ftext => Some($name::$first),
                    $($text => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("can not unmarshal {s:?}")))
            }
        }
    };
}

go_enum!(
    /// `retention`.
    Retention { Limits = "limits", Interest = "interest", WorkQueue = "workqueue" }
);
go_enum!(
    /// `discard`.
    DiscardPolicy { Old = "old", New = "new" }
);
go_enum!(
    /// `storage`.
    StorageType { File = "file", Memory = "memory" }
);
go_enum!(
    /// `compression`.
    Compression { None = "none", S2 = "s2" }
);
go_enum!(
    /// `persist_mode`.
    PersistMode { Default = "default", Async = "async" }
);
go_enum!(
    /// `deliver_policy`.
    DeliverPolicy {
        All = "all",
        Last = "last",
        New = "new",
        ByStartSequence = "by_start_sequence",
        ByStartTime = "by_start_time",
        LastPerSubject = "last_per_subject",
    }
);
go_enum!(
    /// `ack_policy` (zero value: none).
    AckPolicy { None = "none", All = "all", Explicit = "explicit", FlowControl = "flow_control" }
);
go_enum!(
    /// `replay_policy`.
    ReplayPolicy { Instant = "instant", Original = "original" }
);
go_enum!(
    /// `priority_policy`.
    PriorityPolicy { None = "none", Overflow = "overflow", PinnedClient = "pinned_client", Prioritized = "prioritized" }
);

impl PersistMode {
    fn is_default(&self) -> bool {
        *self == PersistMode::Default
    }
}
impl PriorityPolicy {
    fn is_none(&self) -> bool {
        *self == PriorityPolicy::None
    }
}

/// `placement`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub cluster: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub preferred: String,
}

/// `{src, dest}` subject transforms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectTransform {
    #[serde(default, deserialize_with = "null_default")]
    pub src: String,
    #[serde(default, deserialize_with = "null_default")]
    pub dest: String,
}

/// `republish`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RePublish {
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub src: String,
    #[serde(default, deserialize_with = "null_default")]
    pub dest: String,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub headers_only: bool,
}

/// `external` of a mirror or source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalStream {
    #[serde(default, deserialize_with = "null_default")]
    pub api: String,
    #[serde(default, deserialize_with = "null_default")]
    pub deliver: String,
}

/// `consumer` of a source (2.14 sourcing through a named consumer).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConsumer {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub deliver_subject: String,
}

/// A mirror or a source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSource {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "is_zero_u64", deserialize_with = "null_default")]
    pub opt_start_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<GoTime>,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub filter_subject: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub subject_transforms: Vec<SubjectTransform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalStream>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<SourceConsumer>,
}

/// `consumer_limits` of a stream (always serialized, possibly `{}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerLimits {
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub inactive_threshold: i64,
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_ack_pending: i64,
}

/// A stream's configuration (`StreamConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub subjects: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub retention: Retention,
    #[serde(default, deserialize_with = "null_default")]
    pub max_consumers: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub max_msgs: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub max_bytes: i64,
    /// Nanoseconds.
    #[serde(default, deserialize_with = "null_default")]
    pub max_age: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub max_msgs_per_subject: i64,
    #[serde(default, skip_serializing_if = "is_zero_i32", deserialize_with = "null_default")]
    pub max_msg_size: i32,
    #[serde(default, deserialize_with = "null_default")]
    pub discard: DiscardPolicy,
    #[serde(default, deserialize_with = "null_default")]
    pub storage: StorageType,
    #[serde(default, deserialize_with = "null_default")]
    pub num_replicas: i64,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub no_ack: bool,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub duplicate_window: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<StreamSource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub sources: Vec<StreamSource>,
    #[serde(default, deserialize_with = "null_default")]
    pub compression: Compression,
    #[serde(default, skip_serializing_if = "is_zero_u64", deserialize_with = "null_default")]
    pub first_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_transform: Option<SubjectTransform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub republish: Option<RePublish>,
    #[serde(default, deserialize_with = "null_default")]
    pub allow_direct: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub mirror_direct: bool,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub discard_new_per_subject: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub sealed: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub deny_delete: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub deny_purge: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub allow_rollup_hdrs: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub consumer_limits: ConsumerLimits,
    #[serde(default, deserialize_with = "null_default")]
    pub allow_msg_ttl: bool,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub subject_delete_marker_ttl: i64,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub allow_msg_counter: bool,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub allow_atomic: bool,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub allow_msg_schedules: bool,
    #[serde(
        default,
        skip_serializing_if = "PersistMode::is_default",
        deserialize_with = "null_default"
    )]
    pub persist_mode: PersistMode,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub allow_batched: bool,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_default"
    )]
    pub metadata: BTreeMap<String, String>,
}

/// A consumer's configuration (`ConsumerConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerConfig {
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub durable_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub description: String,
    #[serde(default, deserialize_with = "null_default")]
    pub deliver_policy: DeliverPolicy,
    #[serde(default, skip_serializing_if = "is_zero_u64", deserialize_with = "null_default")]
    pub opt_start_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<GoTime>,
    #[serde(default, deserialize_with = "null_default")]
    pub ack_policy: AckPolicy,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub ack_wait: i64,
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_deliver: i64,
    /// Nanoseconds each.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub backoff: Vec<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub filter_subject: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub filter_subjects: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub replay_policy: ReplayPolicy,
    #[serde(default, skip_serializing_if = "is_zero_u64", deserialize_with = "null_default")]
    pub rate_limit_bps: u64,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub sample_freq: String,
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_waiting: i64,
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_ack_pending: i64,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub flow_control: bool,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub headers_only: bool,
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_batch: i64,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_expires: i64,
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub max_bytes: i64,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub deliver_subject: String,
    #[serde(default, skip_serializing_if = "String::is_empty", deserialize_with = "null_default")]
    pub deliver_group: String,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub idle_heartbeat: i64,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub inactive_threshold: i64,
    #[serde(default, deserialize_with = "null_default")]
    pub num_replicas: i64,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub mem_storage: bool,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub direct: bool,
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "null_default")]
    pub sourcing: bool,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_default"
    )]
    pub metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<GoTime>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_default")]
    pub priority_groups: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "PriorityPolicy::is_none",
        deserialize_with = "null_default"
    )]
    pub priority_policy: PriorityPolicy,
    /// Nanoseconds.
    #[serde(default, skip_serializing_if = "is_zero_i64", deserialize_with = "null_default")]
    pub priority_timeout: i64,
}

impl ConsumerConfig {
    /// A push consumer delivers to `deliver_subject`.
    pub fn is_push(&self) -> bool {
        !self.deliver_subject.is_empty()
    }

    /// The subject filters (either field), empty for all subjects.
    pub fn filters(&self) -> Vec<String> {
        if !self.filter_subjects.is_empty() {
            self.filter_subjects.clone()
        } else if self.filter_subject.is_empty() {
            Vec::new()
        } else {
            vec![self.filter_subject.clone()]
        }
    }
}
