//! The security settings of a config file as typed data: users and nkey users with their
//! permissions, accounts with their exports, imports, mappings and limits, the auth
//! callout, operators, trusted keys and the account resolver.
//!
//! `server::config` fills these from the file with nats-server's semantics (defaults
//! applied, names upper-cased where the reference does, items kept in file order); they
//! are not yet resolved into runtime structures (accounts, sublists, transforms).

use std::time::Duration;

/// The name of the global account, which clients without an account belong to.
pub const GLOBAL_ACCOUNT: &str = "$G";

/// nats-server's `DEFAULT_ALLOW_RESPONSE_MAX_MSGS`.
pub const DEFAULT_ALLOW_RESPONSE_MAX_MSGS: i64 = 1;
/// nats-server's `DEFAULT_ALLOW_RESPONSE_EXPIRATION` (2 minutes), in nanoseconds.
pub const DEFAULT_ALLOW_RESPONSE_EXPIRATION_NANOS: i64 = 120_000_000_000;
/// nats-server's `DEFAULT_SERVICE_LATENCY_SAMPLING`.
pub const DEFAULT_SERVICE_LATENCY_SAMPLING: u8 = 100;
/// nats-server's `DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD`.
pub const DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD: Duration = Duration::from_secs(120);

/// Everything of the config file that decides who may connect and what they may do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SecurityConfig {
    /// Users with a name: the `authorization { users }` ones and those of every account,
    /// in the order the reference collects them (file order of the blocks).
    pub users: Vec<User>,
    /// Users identified by an nkey, likewise.
    pub nkeys: Vec<NkeyUser>,
    /// Accounts defined in `accounts { ... }` (or `accounts: [names]`), in file order.
    pub accounts: Vec<AccountConfig>,
    /// Mappings of the global account (top-level `mappings`/`maps`), in file order.
    pub global_mappings: Vec<Mapping>,
    /// Whether an `authorization { }` block was present.
    pub authorization_block: bool,
    /// `authorization { default_permissions }`: applied to the block's users that have
    /// none of their own (already applied in `users`/`nkeys`).
    pub default_permissions: Option<Permissions>,
    /// `authorization { proxy_required }`.
    pub proxy_required: bool,
    /// `proxies { trusted: [{key}] }`: the trusted proxies' public keys (`Some` when
    /// the block is present, even empty).
    pub proxies: Option<Vec<String>>,
    /// `authorization { auth_callout }`.
    pub auth_callout: Option<AuthCallout>,
    /// `no_auth_user`: the user (name or nkey) a client without credentials becomes.
    pub no_auth_user: String,
    /// `system_account`/`system` (or the first operator's system account).
    pub system_account: String,
    /// `no_system_account`/`no_system`/`no_sys_acc`.
    pub no_system_account: bool,
    /// `operator`/`operators`/`root`/...: the trusted operators, decoded and verified.
    pub operators: Vec<OperatorJwt>,
    /// `trusted`/`trusted_keys`: public operator nkeys.
    pub trusted_keys: Vec<String>,
    /// `resolver`/`account_resolver`/`accounts_resolver` (or the one an operator's
    /// account server URL implies).
    pub resolver: Option<ResolverConfig>,
    /// `resolver_tls`: the URL resolver's TLS client settings.
    pub resolver_tls: Option<crate::transport::tls::TlsOptions>,
    /// `resolver_preload`: account public key and account JWT, in file order.
    pub resolver_preload: Vec<(String, String)>,
    /// `resolver_pinned_accounts`: account public keys, in file order, without repeats.
    pub resolver_pinned_accounts: Vec<String>,
    /// `default_sentinel`: the bearer user JWT for clients without credentials.
    pub default_sentinel: String,
}

impl SecurityConfig {
    /// The named users of account `name`, in file order.
    pub fn account_users<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a User> + 'a {
        self.users.iter().filter(move |u| u.account.as_deref() == Some(name))
    }

    /// The nkey users of account `name`, in file order.
    pub fn account_nkeys<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a NkeyUser> + 'a {
        self.nkeys.iter().filter(move |u| u.account.as_deref() == Some(name))
    }

    /// The account called `name`.
    pub fn account(&self, name: &str) -> Option<&AccountConfig> {
        self.accounts.iter().find(|a| a.name == name)
    }
}

/// A user with a name and a password (plain or bcrypt).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct User {
    pub username: String,
    pub password: String,
    pub permissions: Option<Permissions>,
    /// The account the user belongs to (`None`: the global account).
    pub account: Option<String>,
    /// Upper-cased connection types (`STANDARD`, `WEBSOCKET`, `LEAFNODE`, `LEAFNODE_WS`,
    /// `MQTT`, `MQTT_WS`, `IN_PROCESS`) in file order; `None` when not restricted.
    pub allowed_connection_types: Option<Vec<String>>,
    pub proxy_required: bool,
}

/// A user identified by its public user nkey (`U...`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NkeyUser {
    pub nkey: String,
    pub permissions: Option<Permissions>,
    pub account: Option<String>,
    pub allowed_connection_types: Option<Vec<String>>,
    pub proxy_required: bool,
}

/// What a user may publish and subscribe to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Permissions {
    pub publish: Option<SubjectPermission>,
    pub subscribe: Option<SubjectPermission>,
    /// `allow_responses`: publishing to reply subjects of received requests.
    pub response: Option<ResponsePermission>,
}

/// Allowed and denied subjects (subscribe subjects may carry a queue: `"foo.* q"`).
/// `allow: None` allows everything; `Some(vec![])` allows nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubjectPermission {
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
}

/// `allow_responses`: how many responses and for how long. Negative values mean
/// unlimited.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponsePermission {
    pub max_msgs: i64,
    pub expires_nanos: i64,
}

impl Default for ResponsePermission {
    fn default() -> Self {
        ResponsePermission {
            max_msgs: DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
            expires_nanos: DEFAULT_ALLOW_RESPONSE_EXPIRATION_NANOS,
        }
    }
}

/// `authorization { auth_callout { ... } }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuthCallout {
    /// Public account nkey that signs the responses.
    pub issuer: String,
    /// Account the callout requests are sent in (default `$G`).
    pub account: String,
    /// Users that bypass the callout (the auth service's own).
    pub auth_users: Vec<String>,
    /// Public curve key for encrypted requests (empty: none).
    pub xkey: String,
    /// Accounts whose users go through the callout (empty: all).
    pub allowed_accounts: Vec<String>,
}

/// One account of `accounts { }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccountConfig {
    pub name: String,
    /// Public account nkey (`A...`), when given.
    pub nkey: Option<String>,
    /// In file order.
    pub exports: Vec<Export>,
    /// In file order.
    pub imports: Vec<Import>,
    pub mappings: Vec<Mapping>,
    /// Applied to the account's users without permissions of their own (already applied
    /// in `SecurityConfig::users`/`nkeys`).
    pub default_permissions: Option<Permissions>,
    pub limits: AccountLimits,
    pub jetstream: AccountJetStream,
    pub msg_trace: Option<MsgTrace>,
}

/// An export: a stream or a service that other accounts may import.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    pub subject: String,
    /// `None`: public; `Some(empty)`: an activation token is required; otherwise the
    /// accounts allowed to import.
    pub accounts: Option<Vec<String>>,
    /// 1-based token of the subject that must equal the importing account (0: none).
    pub account_token_position: u32,
    pub kind: ExportKind,
}

/// Stream or service, with the service-only settings.
#[derive(Clone, Debug, PartialEq)]
pub enum ExportKind {
    Stream,
    Service(ServiceExport),
}

/// The settings of a service export.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceExport {
    pub response_type: ResponseType,
    /// Time allowed for a response (default 2 minutes).
    pub response_threshold: Option<Duration>,
    pub latency: Option<Latency>,
    pub allow_trace: bool,
}

/// How a service responds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseType {
    #[default]
    Singleton,
    Streamed,
    Chunked,
}

/// Service latency tracking.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    pub sampling: LatencySampling,
    /// Where latency results are published.
    pub subject: String,
}

/// Which requests are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencySampling {
    /// 1 to 100 percent.
    Percent(u8),
    /// Requests carrying the tracing headers.
    Headers,
}

/// An import of another account's stream or service.
#[derive(Clone, Debug, PartialEq)]
pub enum Import {
    Stream(StreamImport),
    Service(ServiceImport),
}

/// `{ stream: { account, subject }, prefix | to, allow_trace }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamImport {
    pub account: String,
    pub subject: String,
    /// Literal prefix put before the subject (empty: none).
    pub prefix: String,
    /// Subject the stream is mapped to (empty: the subject itself).
    pub to: String,
    pub allow_trace: bool,
}

/// `{ service: { account, subject }, to, share }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceImport {
    pub account: String,
    /// The exporting account's subject.
    pub subject: String,
    /// The local subject requests are sent to (the subject itself when not given).
    pub to: String,
    /// Share the requestor's information with the exporter (latency tracking).
    pub share: bool,
}

/// A subject mapping with its weighted destinations, as written (the reference adds the
/// source itself for the remaining weight when building the transform).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mapping {
    pub source: String,
    pub destinations: Vec<MapDest>,
}

/// One destination of a mapping.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MapDest {
    pub subject: String,
    /// 0 to 100 percent.
    pub weight: u8,
    /// Only in this cluster (empty: everywhere).
    pub cluster: String,
}

/// Account limits; -1 means unlimited (the reference's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct AccountLimits {
    pub max_connections: i32,
    pub max_subscriptions: i32,
    pub max_payload: i32,
    pub max_leafnodes: i32,
}

impl Default for AccountLimits {
    fn default() -> Self {
        AccountLimits {
            max_connections: -1,
            max_subscriptions: -1,
            max_payload: -1,
            max_leafnodes: -1,
        }
    }
}

/// An account's `jetstream` setting, stored until JetStream exists.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum AccountJetStream {
    /// Not enabled (absent, `false` or `disabled`).
    #[default]
    Disabled,
    /// `true` or `enabled`: the default (unlimited) tiers.
    Enabled,
    /// A map of limits.
    Limits(JetStreamAccountLimits),
}

/// The limits of an account's `jetstream { }` map; -1 means unlimited.
#[derive(Clone, Debug, PartialEq)]
pub struct JetStreamAccountLimits {
    pub max_memory: i64,
    pub max_store: i64,
    pub max_streams: i64,
    pub max_consumers: i64,
    pub max_ack_pending: i64,
    pub memory_max_stream_bytes: i64,
    pub store_max_stream_bytes: i64,
    pub max_bytes_required: bool,
    /// `cluster_traffic: owner`: the account's own raft traffic stays in the account.
    pub cluster_traffic_owner: bool,
}

impl Default for JetStreamAccountLimits {
    fn default() -> Self {
        JetStreamAccountLimits {
            max_memory: -1,
            max_store: -1,
            max_streams: -1,
            max_consumers: -1,
            max_ack_pending: -1,
            memory_max_stream_bytes: -1,
            store_max_stream_bytes: -1,
            max_bytes_required: false,
            cluster_traffic_owner: false,
        }
    }
}

/// `msg_trace`/`trace_dest`: where traced messages of the account go.
#[derive(Clone, Debug, PartialEq)]
pub struct MsgTrace {
    /// Empty when only a sampling was given (then the sampling is 0, with a warning).
    pub dest: String,
    /// 1 to 100 percent (100 when not given).
    pub sampling: u8,
}

/// A trusted operator JWT, as read and verified at load time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorJwt {
    /// The value written in the config: a file path or the JWT itself.
    pub source: String,
    /// The encoded JWT.
    pub jwt: String,
    /// The operator's public key (`sub`).
    pub subject: String,
    pub name: String,
    pub system_account: String,
    pub account_server_url: String,
    pub signing_keys: Vec<String>,
    pub strict_signing_key_usage: bool,
    pub assert_server_version: String,
}

/// The account resolver.
#[derive(Clone, Debug, PartialEq)]
pub enum ResolverConfig {
    /// `MEM`/`MEMORY`: accounts from `resolver_preload` only.
    Memory,
    /// `URL(...)`: fetch account JWTs over HTTP (the URL ends with `/`).
    Url(String),
    /// `{ type: full, ... }`: the nats-based resolver keeping every account.
    Full(DirResolver),
    /// `{ type: cache, ... }`: the nats-based resolver keeping a cache.
    Cache(DirResolver),
}

/// The settings of a directory-backed resolver.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirResolver {
    pub dir: String,
    /// Maximum number of JWTs kept (0: the reference's default).
    pub limit: i64,
    /// `ttl` (cache only).
    pub ttl: Duration,
    /// `interval` between syncs (full only).
    pub interval: Duration,
    /// `timeout` of a fetch (`None`: the default).
    pub timeout: Option<Duration>,
    pub delete: DeleteMode,
}

/// What a full resolver does with a deleted account JWT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeleteMode {
    /// Deletion not allowed.
    #[default]
    NoDelete,
    /// Renamed to `.deleted`.
    Rename,
    /// Removed.
    Hard,
}
