//! Consumer configuration rules of nats-server 2.14 as a create request meets them: the
//! create subject forms and their name/filter rules, the defaults filled in, the checks
//! of a new configuration (exact error codes and texts), the fields an update may change,
//! the work-queue rules, the `_nats.*` version metadata and ephemeral names.
//!
//! Order on create (as the reference): [`parse_create_subject`], decode the body,
//! [`resolve_create`], look the stream up, [`set_static_metadata`], [`apply_defaults`],
//! [`check`], then for an existing consumer [`check_update`], else [`check_work_queue`].

use super::config::{AckPolicy, ConsumerConfig, DeliverPolicy, PriorityPolicy, Retention, StreamConfig};
use super::consumer_info::CreateConsumerRequest;
use super::duration::format_go_duration;
use super::errors::ApiError;
use super::errors_table as t;
use crate::core::subject::{has_wildcard, is_valid_subject, subjects_collide};
use crate::server::config::is_subset_match;

/// The server's JetStream API level and version, as `_nats.*` metadata reports them.
pub const API_LEVEL: u32 = 4;
pub const SERVER_VERSION: &str = "2.14.0";
pub const META_REQUIRED_LEVEL: &str = "_nats.req.level";
pub const META_VERSION: &str = "_nats.ver";
pub const META_LEVEL: &str = "_nats.level";

const ACK_WAIT_DEFAULT: i64 = 30_000_000_000;
const MAX_WAITING_DEFAULT: i64 = 512;
const MAX_ACK_PENDING_DEFAULT: i64 = 1000;
const PINNED_TTL_DEFAULT: i64 = 120_000_000_000;
/// The heartbeat `ack_policy: flow_control` requires (the sourcing heartbeat).
const FLOW_CONTROL_HB: i64 = 1_000_000_000;
const MAX_DESCRIPTION_LEN: usize = 4 * 1024;
const MAX_METADATA_LEN: usize = 128 * 1024;
/// Longest consumer name.
pub const MAX_NAME_LEN: usize = 255;

/// What the checks need beyond the configuration itself.
#[derive(Clone, Copy, Debug)]
pub struct ConsumerCtx<'a> {
    /// The stream's configuration (subjects for the delivery-cycle check, replicas,
    /// retention, `consumer_limits`, placement).
    pub stream: &'a StreamConfig,
    pub pedantic: bool,
    /// The account's (selected tier's) `max_ack_pending` limit; 0 or less for none.
    pub account_max_ack_pending: i64,
    /// The server's `jetstream.limits.max_ack_pending`; -1 (0 or less) for none.
    pub server_max_ack_pending: i64,
    /// The server's `jetstream.limits.max_request_batch`; 0 or less for none.
    pub server_max_request_batch: i64,
}

fn pedantic(text: &str) -> ApiError {
    t::JS_PEDANTIC_ERR_F.err_with(text)
}

/// Fill in the defaults (nats-server's `setConsumerConfigDefaults`); in pedantic mode a
/// value the server would have changed is an error instead.
pub fn apply_defaults(cfg: &mut ConsumerConfig, ctx: &ConsumerCtx) -> Result<(), ApiError> {
    let ped = ctx.pedantic;
    let limits = &ctx.stream.consumer_limits;
    if cfg.max_deliver == 0 || cfg.max_deliver < -1 {
        if ped && cfg.max_deliver < -1 {
            return Err(pedantic("max_deliver must be set to -1"));
        }
        cfg.max_deliver = -1;
    }
    // Negative values read as zero (or, for max_ack_pending, as unlimited).
    let zeroed: [(&mut i64, &str); 8] = [
        (&mut cfg.max_waiting, "max_waiting must not be negative"),
        (&mut cfg.max_ack_pending, "max_ack_pending must be set to -1"),
        (&mut cfg.max_batch, "max_batch must not be negative"),
        (&mut cfg.max_expires, "max_expires must not be negative"),
        (&mut cfg.max_bytes, "max_bytes must not be negative"),
        (&mut cfg.idle_heartbeat, "idle_heartbeat must not be negative"),
        (&mut cfg.inactive_threshold, "inactive_threshold must not be negative"),
        (&mut cfg.priority_timeout, "priority_timeout must not be negative"),
    ];
    for (i, (v, text)) in zeroed.into_iter().enumerate() {
        // max_ack_pending (index 1) allows -1.
        let (bad, to) = if i == 1 { (*v < -1, -1) } else { (*v < 0, 0) };
        if bad {
            if ped {
                return Err(pedantic(text));
            }
            *v = to;
        }
    }
    if cfg.deliver_subject.is_empty() && cfg.max_waiting == 0 {
        cfg.max_waiting = MAX_WAITING_DEFAULT;
    }
    if cfg.ack_wait == 0 && matches!(cfg.ack_policy, AckPolicy::Explicit | AckPolicy::All) {
        cfg.ack_wait = ACK_WAIT_DEFAULT;
    }
    if let Some(&first) = cfg.backoff.first() {
        if ped && cfg.ack_wait != first {
            return Err(pedantic("first backoff value has to equal batch AckWait"));
        }
        cfg.ack_wait = first;
    }
    if cfg.max_ack_pending == 0 {
        if ped && limits.max_ack_pending > 0 {
            return Err(pedantic(
                "max_ack_pending must be set if it's configured in stream limits",
            ));
        }
        cfg.max_ack_pending = limits.max_ack_pending;
    }
    if cfg.inactive_threshold == 0 {
        if ped && limits.inactive_threshold > 0 {
            return Err(pedantic(
                "inactive_threshold must be set if it's configured in stream limits",
            ));
        }
        cfg.inactive_threshold = limits.inactive_threshold;
    }
    if cfg.max_ack_pending == 0 && cfg.ack_policy != AckPolicy::None {
        let mut p = MAX_ACK_PENDING_DEFAULT;
        for lim in [ctx.server_max_ack_pending, ctx.account_max_ack_pending] {
            if lim > 0 && lim < p {
                p = lim;
            }
        }
        cfg.max_ack_pending = p;
    }
    if cfg.deliver_subject.is_empty() && cfg.max_batch == 0 && ctx.server_max_request_batch > 0 {
        if ped {
            return Err(pedantic(
                "max_request_batch must be set if it's JetStream limits are set",
            ));
        }
        cfg.max_batch = ctx.server_max_request_batch;
    }
    if cfg.priority_policy == PriorityPolicy::PinnedClient && cfg.priority_timeout == 0 {
        cfg.priority_timeout = PINNED_TTL_DEFAULT;
    }
    if cfg.ack_policy == AckPolicy::FlowControl && !ped {
        cfg.flow_control = true;
        cfg.idle_heartbeat = FLOW_CONTROL_HB;
    }
    Ok(())
}

/// nats-server's `isValidAssetName`: not empty, no white space, `.`, `*`, `>`, `\`, `/`.
pub fn is_valid_asset_name(name: &str) -> bool {
    !name.is_empty() && !name.contains([' ', '\t', '\r', '\n', '\x0c', '.', '*', '>', '\\', '/'])
}

fn invalid_config(text: &str) -> ApiError {
    t::JS_STREAM_INVALID_CONFIG_F.err_with(text)
}

/// Go's `strconv.Atoi` error text for `s`, or `None` when it parses (with its value).
fn atoi_error(s: &str) -> Result<i64, String> {
    let q = crate::proto::reply::go_quote(s.as_bytes());
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {q}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {q}: value out of range"))
}

/// Priority group names: `^[a-zA-Z0-9/_=-]{1,16}$`.
fn valid_group_name(g: &str) -> bool {
    (1..=16).contains(&g.len())
        && g.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'_' | b'=' | b'-'))
}

/// Check a configuration after [`apply_defaults`] (nats-server's `checkConsumerCfg`);
/// the first failing rule is the error. `is_recovering` relaxes the replicas rule of
/// interest and work-queue streams, as on startup.
pub fn check(cfg: &ConsumerConfig, ctx: &ConsumerCtx, is_recovering: bool) -> Result<(), ApiError> {
    let stream = ctx.stream;
    if !cfg.name.is_empty() && !is_valid_asset_name(&cfg.name) {
        return Err(invalid_config("consumer name can not contain '.', '*', '>', '\\', '/'"));
    }
    if !cfg.durable_name.is_empty() && !is_valid_asset_name(&cfg.durable_name) {
        return Err(invalid_config(
            "consumer durable name can not contain '.', '*', '>', '\\', '/'",
        ));
    }
    if cfg.num_replicas > 0 && cfg.num_replicas > stream.num_replicas {
        return Err(t::JS_CONSUMER_REPLICAS_EXCEEDS_STREAM.err());
    }
    if cfg.num_replicas < 0 {
        return Err(t::JS_REPLICAS_COUNT_CANNOT_BE_NEGATIVE.err());
    }
    if matches!(stream.retention, Retention::Interest | Retention::WorkQueue)
        && !is_recovering
        && cfg.num_replicas != 0
        && cfg.num_replicas != stream.num_replicas
    {
        return Err(t::JS_CONSUMER_REPLICAS_SHOULD_MATCH_STREAM.err());
    }
    if cfg.backoff.iter().any(|b| *b < 0) {
        return Err(t::JS_CONSUMER_BACK_OFF_NEGATIVE_ERR.err());
    }
    if cfg.ack_wait < 0 {
        return Err(t::JS_CONSUMER_ACK_WAIT_NEGATIVE_ERR.err());
    }
    if cfg.ack_policy == AckPolicy::FlowControl {
        if cfg.deliver_subject.is_empty() {
            return Err(t::JS_CONSUMER_ACK_FC_REQUIRES_PUSH_ERR.err());
        }
        if !cfg.flow_control {
            return Err(t::JS_CONSUMER_ACK_FC_REQUIRES_FC_ERR.err());
        }
        if cfg.idle_heartbeat != FLOW_CONTROL_HB {
            return Err(invalid_config("flow control ack policy heartbeat needs to be 1s"));
        }
        if cfg.max_ack_pending <= 0 {
            return Err(t::JS_CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING_ERR.err());
        }
        if cfg.ack_wait != 0 || !cfg.backoff.is_empty() {
            return Err(t::JS_CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT_ERR.err());
        }
        if cfg.max_deliver > 0 {
            return Err(t::JS_CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER_ERR.err());
        }
    }
    backoff_fits(cfg)?;
    if cfg.description.len() > MAX_DESCRIPTION_LEN {
        return Err(t::JS_CONSUMER_DESCRIPTION_TOO_LONG_ERR_F.with(&[("max", &MAX_DESCRIPTION_LEN.to_string())]));
    }
    if cfg.is_push() {
        let ds = cfg.deliver_subject.as_str();
        if has_wildcard(ds.as_bytes()) {
            return Err(t::JS_CONSUMER_DELIVER_TO_WILDCARDS_ERR.err());
        }
        if !is_valid_subject(ds.as_bytes()) {
            return Err(t::JS_CONSUMER_INVALID_DELIVER_SUBJECT.err());
        }
        if stream.subjects.iter().any(|s| is_subset_match(ds, s)) {
            return Err(t::JS_CONSUMER_DELIVER_CYCLE_ERR.err());
        }
        if cfg.max_waiting != 0 {
            return Err(t::JS_CONSUMER_PUSH_MAX_WAITING_ERR.err());
        }
        if cfg.max_ack_pending > 0 && cfg.ack_policy == AckPolicy::None {
            return Err(t::JS_CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED_ERR.err());
        }
        if cfg.idle_heartbeat > 0 && cfg.idle_heartbeat < 100_000_000 {
            return Err(t::JS_CONSUMER_SMALL_HEARTBEAT_ERR.err());
        }
    } else {
        if cfg.ack_policy == AckPolicy::None && stream.retention == Retention::WorkQueue {
            return Err(t::JS_CONSUMER_PULL_REQUIRES_ACK_ERR.err());
        }
        if cfg.rate_limit_bps > 0 {
            return Err(t::JS_CONSUMER_PULL_WITH_RATE_LIMIT_ERR.err());
        }
        if cfg.max_waiting < 0 {
            return Err(t::JS_CONSUMER_MAX_WAITING_NEGATIVE_ERR.err());
        }
        if cfg.idle_heartbeat > 0 {
            return Err(t::JS_CONSUMER_HB_REQUIRES_PUSH_ERR.err());
        }
        if cfg.flow_control {
            return Err(t::JS_CONSUMER_FC_REQUIRES_PUSH_ERR.err());
        }
        if cfg.max_batch < 0 {
            return Err(t::JS_CONSUMER_MAX_REQUEST_BATCH_NEGATIVE_ERR.err());
        }
        if cfg.max_expires != 0 && cfg.max_expires < 1_000_000 {
            return Err(t::JS_CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL.err());
        }
        if ctx.server_max_request_batch > 0 && cfg.max_batch > ctx.server_max_request_batch {
            return Err(t::JS_CONSUMER_MAX_REQUEST_BATCH_EXCEEDED_F
                .with(&[("limit", &ctx.server_max_request_batch.to_string())]));
        }
    }
    for lim in [
        ctx.server_max_ack_pending,
        ctx.account_max_ack_pending,
        stream.consumer_limits.max_ack_pending,
    ] {
        if lim > 0 && cfg.max_ack_pending > lim {
            return Err(t::JS_CONSUMER_MAX_PENDING_ACK_EXCESS_ERR_F.with(&[("limit", &lim.to_string())]));
        }
    }
    let it = stream.consumer_limits.inactive_threshold;
    if it > 0 && cfg.inactive_threshold > it {
        return Err(t::JS_CONSUMER_INACTIVE_THRESHOLD_EXCESS.with(&[("limit", &format_go_duration(it))]));
    }
    if cfg.direct {
        if !cfg.is_push() {
            return Err(t::JS_CONSUMER_DIRECT_REQUIRES_PUSH_ERR.err());
        }
        if !cfg.durable_name.is_empty() {
            return Err(t::JS_CONSUMER_DIRECT_REQUIRES_EPHEMERAL_ERR.err());
        }
    }
    check_filters(cfg)?;
    check_start(cfg)?;
    if !cfg.sample_freq.is_empty() {
        let s = cfg.sample_freq.strip_suffix('%').unwrap_or(&cfg.sample_freq);
        match atoi_error(s) {
            Err(e) => return Err(t::JS_CONSUMER_INVALID_SAMPLING_ERR_F.err_with(e)),
            Ok(n) if n < 0 => return Err(t::JS_CONSUMER_INVALID_SAMPLING_ERR_F.err_with("<nil>")),
            Ok(_) => {}
        }
    }
    if cfg.flow_control && cfg.idle_heartbeat == 0 {
        return Err(t::JS_CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS.err());
    }
    if !cfg.durable_name.is_empty() && !cfg.name.is_empty() && cfg.name != cfg.durable_name {
        return Err(t::JS_CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH.err());
    }
    let meta: usize = cfg.metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if meta > MAX_METADATA_LEN {
        return Err(t::JS_CONSUMER_METADATA_LENGTH_ERR_F.with(&[("limit", &format!("{}KB", MAX_METADATA_LEN / 1024))]));
    }
    if cfg.priority_policy != PriorityPolicy::None {
        if cfg.is_push() {
            return Err(t::JS_CONSUMER_PUSH_WITH_PRIORITY_GROUP_ERR.err());
        }
        if cfg.priority_groups.is_empty() {
            return Err(t::JS_CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP.err());
        }
        for g in &cfg.priority_groups {
            if g.is_empty() {
                return Err(t::JS_CONSUMER_EMPTY_GROUP_NAME.err());
            }
            if !valid_group_name(g) {
                return Err(t::JS_CONSUMER_INVALID_GROUP_NAME_ERR.err());
            }
        }
    } else {
        if !cfg.priority_groups.is_empty() {
            return Err(t::JS_CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE.err());
        }
        if cfg.priority_timeout > 0 {
            return Err(t::JS_CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE.err());
        }
    }
    if stream.placement.as_ref().is_some_and(|p| !p.preferred.is_empty()) {
        return Err(invalid_config("preferred server not permitted in placement"));
    }
    Ok(())
}

/// `backoff` needs `max_deliver` above its length (unless unlimited).
fn backoff_fits(cfg: &ConsumerConfig) -> Result<(), ApiError> {
    let n = cfg.backoff.len();
    if n > 0 && cfg.max_deliver != -1 && i64::try_from(n).unwrap_or(i64::MAX) > cfg.max_deliver {
        return Err(t::JS_CONSUMER_MAX_DELIVER_BACKOFF_ERR.err());
    }
    Ok(())
}

fn check_filters(cfg: &ConsumerConfig) -> Result<(), ApiError> {
    if !cfg.filter_subject.is_empty() && !cfg.filter_subjects.is_empty() {
        return Err(t::JS_CONSUMER_DUPLICATE_FILTER_SUBJECTS.err());
    }
    if !cfg.filter_subject.is_empty() && !is_valid_subject(cfg.filter_subject.as_bytes()) {
        return Err(invalid_config("invalid subject"));
    }
    if cfg.filter_subjects.iter().any(String::is_empty) {
        return Err(t::JS_CONSUMER_EMPTY_FILTER.err());
    }
    let filters = cfg.filters();
    for (i, a) in filters.iter().enumerate() {
        if !is_valid_subject(a.as_bytes()) {
            return Err(invalid_config("invalid subject"));
        }
        for (j, b) in filters.iter().enumerate() {
            if i != j && is_subset_match(a, b) {
                return Err(t::JS_CONSUMER_OVERLAPPING_SUBJECT_FILTERS.err());
            }
        }
    }
    Ok(())
}

fn check_start(cfg: &ConsumerConfig) -> Result<(), ApiError> {
    let bad_start = |dp: &str, start: &str| {
        Err(t::JS_CONSUMER_INVALID_POLICY_ERR_F.err_with(format!(
            "consumer delivery policy is deliver {dp}, but optional start {start} is also set"
        )))
    };
    let not_set = |dp: &str, what: &str| {
        Err(t::JS_CONSUMER_INVALID_POLICY_ERR_F.err_with(format!(
            "consumer delivery policy is deliver {dp}, but optional {what} is not set"
        )))
    };
    let (seq, time) = (cfg.opt_start_seq > 0, cfg.opt_start_time.is_some());
    match cfg.deliver_policy {
        DeliverPolicy::All | DeliverPolicy::Last | DeliverPolicy::New | DeliverPolicy::LastPerSubject => {
            let dp = match cfg.deliver_policy {
                DeliverPolicy::All => "all",
                DeliverPolicy::Last => "last",
                DeliverPolicy::New => "new",
                _ => "last per subject",
            };
            if seq {
                return bad_start(dp, "sequence");
            }
            if time {
                return bad_start(dp, "time");
            }
            if cfg.deliver_policy == DeliverPolicy::LastPerSubject && cfg.filters().is_empty() {
                return not_set(dp, "filter subject");
            }
        }
        DeliverPolicy::ByStartSequence => {
            if !seq {
                return not_set("by start sequence", "start sequence");
            }
            if time {
                return bad_start("by start sequence", "time");
            }
        }
        DeliverPolicy::ByStartTime => {
            if !time {
                return not_set("by start time", "start time");
            }
            if cfg.opt_start_seq != 0 {
                return bad_start("by start time", "start sequence");
            }
        }
    }
    Ok(())
}

/// May `old` become `new`? (nats-server's `checkNewConsumerConfig`.) Refusals are
/// `500/10012` with the reference's text, or the backoff error. A changed deliver subject
/// while the old one still has interest is also refused; see [`check_update_bound`].
pub fn check_update(old: &ConsumerConfig, new: &ConsumerConfig) -> Result<(), ApiError> {
    check_update_bound(old, new, false)
}

/// [`check_update`] knowing whether the old deliver subject still has interest (then a
/// push consumer may not move: `10013 consumer name already in use`).
pub fn check_update_bound(old: &ConsumerConfig, new: &ConsumerConfig, old_deliver_bound: bool) -> Result<(), ApiError> {
    if old == new {
        return Ok(());
    }
    let refuse = |text: &str| Err(t::JS_CONSUMER_CREATE_ERR_F.err_with(text));
    if old.deliver_policy != new.deliver_policy {
        return refuse("deliver policy can not be updated");
    }
    if old.opt_start_seq != new.opt_start_seq {
        return refuse("start sequence can not be updated");
    }
    if old.opt_start_time != new.opt_start_time {
        return refuse("start time can not be updated");
    }
    if old.ack_policy != new.ack_policy {
        return refuse("ack policy can not be updated");
    }
    if old.replay_policy != new.replay_policy {
        return refuse("replay policy can not be updated");
    }
    if old.idle_heartbeat != new.idle_heartbeat {
        return refuse("heart beats can not be updated");
    }
    if old.flow_control != new.flow_control {
        return refuse("flow control can not be updated");
    }
    if old.deliver_subject != new.deliver_subject {
        if old.deliver_subject.is_empty() {
            return refuse("can not update pull consumer to push based");
        }
        if new.deliver_subject.is_empty() {
            return refuse("can not update push consumer to pull based");
        }
        if old_deliver_bound {
            return Err(t::JS_CONSUMER_NAME_EXIST_ERR.err());
        }
    }
    if old.max_waiting != new.max_waiting {
        return refuse("max waiting can not be updated");
    }
    backoff_fits(new)
}

/// The work-queue rules for a new consumer (after the existing-consumer lookup): explicit
/// acks (or flow control), deliver all, and a filter that no other consumer's overlaps.
/// `others` are the stream's other consumers, by name. Direct and sourcing consumers are
/// exempt, and ignored among the others.
pub fn check_work_queue<'a>(
    cfg: &ConsumerConfig,
    name: &str,
    stream: &StreamConfig,
    others: impl IntoIterator<Item = (&'a str, &'a ConsumerConfig)> + Clone,
) -> Result<(), ApiError> {
    if stream.retention != Retention::WorkQueue || cfg.direct || cfg.sourcing {
        return Ok(());
    }
    if !matches!(cfg.ack_policy, AckPolicy::Explicit | AckPolicy::FlowControl) {
        return Err(t::JS_CONSUMER_WQ_REQUIRES_EXPLICIT_ACK_ERR.err());
    }
    let limitable = others.clone().into_iter().any(|(_, o)| !o.direct && !o.sourcing);
    if limitable {
        let filters = cfg.filters();
        if filters.is_empty() {
            return Err(t::JS_CONSUMER_WQ_MULTIPLE_UNFILTERED_ERR.err());
        }
        if !partition_unique(name, &filters, others) {
            return Err(t::JS_CONSUMER_WQ_CONSUMER_NOT_UNIQUE_ERR.err());
        }
    }
    if cfg.deliver_policy != DeliverPolicy::All {
        return Err(t::JS_CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL_ERR.err());
    }
    Ok(())
}

/// No other (non-direct, non-sourcing) consumer is unfiltered or has a filter that
/// collides with one of `partitions`.
pub fn partition_unique<'a>(
    name: &str,
    partitions: &[String],
    others: impl IntoIterator<Item = (&'a str, &'a ConsumerConfig)> + Clone,
) -> bool {
    partitions.iter().all(|p| {
        others
            .clone()
            .into_iter()
            .filter(|(n, o)| *n != name && !o.direct && !o.sourcing)
            .all(|(_, o)| {
                let f = o.filters();
                !f.is_empty() && !f.iter().any(|s| subjects_collide(p, s))
            })
    })
}

/// The forms of a consumer create subject (`$JS.API.` prefix included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateSubject {
    /// `$JS.API.CONSUMER.CREATE.<S>`: ephemeral, or named by `config.name`.
    Legacy { stream: String },
    /// `$JS.API.CONSUMER.DURABLE.CREATE.<S>.<C>`.
    Durable { stream: String, name: String },
    /// `$JS.API.CONSUMER.CREATE.<S>.<C>[.<filter...>]`.
    Named {
        stream: String,
        name: String,
        filter: Option<String>,
    },
}

/// Recognize a create subject (what the reference subscribes: `CONSUMER.CREATE.*`,
/// `CONSUMER.CREATE.*.>` and `CONSUMER.DURABLE.CREATE.*.*`).
pub fn parse_create_subject(subject: &str) -> Option<CreateSubject> {
    if let Some(rest) = subject.strip_prefix("$JS.API.CONSUMER.DURABLE.CREATE.") {
        let mut it = rest.split('.');
        let (stream, name) = (it.next()?, it.next()?);
        if it.next().is_some() || stream.is_empty() || name.is_empty() {
            return None;
        }
        return Some(CreateSubject::Durable {
            stream: stream.to_string(),
            name: name.to_string(),
        });
    }
    let rest = subject.strip_prefix("$JS.API.CONSUMER.CREATE.")?;
    let (stream, tail) = match rest.split_once('.') {
        None => {
            return (!rest.is_empty()).then(|| CreateSubject::Legacy {
                stream: rest.to_string(),
            })
        }
        Some(p) => p,
    };
    let (name, filter) = match tail.split_once('.') {
        None => (tail, None),
        Some((n, f)) => (n, Some(f.to_string())),
    };
    if stream.is_empty() || name.is_empty() || filter.as_deref().is_some_and(str::is_empty) {
        return None;
    }
    Some(CreateSubject::Named {
        stream: stream.to_string(),
        name: name.to_string(),
        filter,
    })
}

/// Apply the subject's rules to the request (the reference's checks between decoding and
/// the stream lookup, in its order), setting `config.name` where the subject names the
/// consumer. Returns the consumer name; empty when an ephemeral name is still to be
/// generated ([`ephemeral_name`]).
pub fn resolve_create(subject: &CreateSubject, req: &mut CreateConsumerRequest) -> Result<String, ApiError> {
    let (stream, name, filter) = match subject {
        CreateSubject::Legacy { stream } => (stream, req.config.name.clone(), None),
        CreateSubject::Durable { stream, name } => (stream, name.clone(), None),
        CreateSubject::Named { stream, name, filter } => (stream, name.clone(), filter.as_deref()),
    };
    if *stream != req.stream_name {
        return Err(t::JS_STREAM_MISMATCH_ERR.err());
    }
    if name.contains(['\\', '/']) {
        return Err(t::JS_CONSUMER_NAME_CONTAINS_PATH_SEPARATORS_ERR.err());
    }
    let durable = &req.config.durable_name;
    match subject {
        CreateSubject::Durable { .. } => {
            if durable.is_empty() {
                return Err(t::JS_CONSUMER_DURABLE_NAME_NOT_SET_ERR.err());
            }
            if *durable != name {
                return Err(t::JS_CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT_ERR.err());
            }
            req.config.name = name.clone();
        }
        CreateSubject::Named { .. } => {
            if !durable.is_empty() && *durable != name {
                return Err(t::JS_CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT_ERR.err());
            }
            req.config.name = name.clone();
        }
        CreateSubject::Legacy { .. } => {
            if !durable.is_empty() {
                return Err(t::JS_CONSUMER_EPHEMERAL_WITH_DURABLE_NAME_ERR.err());
            }
        }
    }
    if let Some(f) = filter {
        if !req.config.filter_subjects.is_empty() {
            return Err(t::JS_CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED.err());
        }
        if req.config.filter_subject != f {
            return Err(t::JS_CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH_ERR.err());
        }
    }
    // A single server has no replicas.
    if req.config.num_replicas > 1 {
        return Err(t::JS_STREAM_REPLICAS_NOT_SUPPORTED_ERR.err());
    }
    Ok(name)
}

/// The API level a configuration needs (pause: 1, priority groups: 1, flow-control acks: 4).
pub fn required_api_level(cfg: &ConsumerConfig) -> u32 {
    let mut level = 0;
    if cfg.pause_until.is_some_and(|t| !t.is_zero()) {
        level = level.max(1);
    }
    if cfg.priority_policy != PriorityPolicy::None || cfg.priority_timeout != 0 || !cfg.priority_groups.is_empty() {
        level = level.max(1);
    }
    if cfg.ack_policy == AckPolicy::FlowControl {
        level = level.max(4);
    }
    level
}

/// The metadata the reference stores with a configuration: the client's `_nats.ver` and
/// `_nats.level` dropped (other keys, `_nats.*` included, kept) and `_nats.req.level` set
/// to what the configuration needs.
pub fn set_static_metadata(cfg: &mut ConsumerConfig) {
    cfg.metadata.remove(META_VERSION);
    cfg.metadata.remove(META_LEVEL);
    cfg.metadata
        .insert(META_REQUIRED_LEVEL.to_string(), required_api_level(cfg).to_string());
}

/// The configuration as responses show it: the stored one plus `_nats.ver` and
/// `_nats.level` of this server.
pub fn with_dynamic_metadata(cfg: &ConsumerConfig) -> ConsumerConfig {
    let mut out = cfg.clone();
    out.metadata
        .insert(META_VERSION.to_string(), SERVER_VERSION.to_string());
    out.metadata.insert(META_LEVEL.to_string(), API_LEVEL.to_string());
    out
}

/// nats-server's `copyConsumerMetadata`, used before comparing a `create` request with the
/// existing configuration: drop the dynamic keys and take `_nats.req.level` from `prev`.
pub fn copy_metadata(cfg: &mut ConsumerConfig, prev: &ConsumerConfig) {
    cfg.metadata.remove(META_VERSION);
    cfg.metadata.remove(META_LEVEL);
    match prev.metadata.get(META_REQUIRED_LEVEL) {
        Some(v) => {
            cfg.metadata.insert(META_REQUIRED_LEVEL.to_string(), v.clone());
        }
        None => {
            cfg.metadata.remove(META_REQUIRED_LEVEL);
        }
    }
}

/// A random ephemeral consumer name: 8 characters of `0-9A-Za-z` (the reference hashes a
/// random id and maps each byte modulo 62 onto that alphabet).
pub fn ephemeral_name() -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let bytes: [u8; 8] = rand::random();
    bytes
        .iter()
        .map(|b| char::from(DIGITS[usize::from(*b) % DIGITS.len()]))
        .collect()
}

#[cfg(test)]
#[path = "consumer_check_tests.rs"]
mod tests;
