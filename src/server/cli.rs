//! Command-line parsing with the rules of Go's `flag` package, which nats-server uses and
//! which test harnesses and scripts rely on: `-flag` and `--flag` are the same, values go
//! as `-flag=value` or `-flag value`, booleans take `-flag` or `-flag=false`, parsing stops
//! at the first non-flag argument, and multi-letter short flags like `-DV` exist.

use super::options::{Options, ReactorChoice};

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    Run(Box<Options>),
    /// `--signal <command>[=<pid or pidfile>]`: signal a running server and exit.
    Signal(String),
    Version,
    Help,
    /// `--help_tls`: the TLS configuration help.
    HelpTls,
    /// Print `message` to stderr; with `usage`, print the usage text to stdout too; exit
    /// with `code`.
    Fail {
        message: String,
        usage: bool,
        code: i32,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Str,
}

struct Flag {
    names: &'static [&'static str],
    kind: Kind,
    set: fn(&mut Parsed, Value<'_>) -> Result<(), String>,
}

enum Value<'a> {
    Bool(bool),
    Int(i64),
    Str(&'a str),
}

#[derive(Default)]
struct Parsed {
    opts: Options,
    help: bool,
    help_tls: bool,
    /// A `--tls*` flag was given; `--tls=false` was.
    tls_given: bool,
    tls_disabled: bool,
    version: bool,
    signal: String,
}

fn b(v: Value<'_>) -> bool {
    matches!(v, Value::Bool(true))
}
fn i(v: Value<'_>) -> i64 {
    match v {
        Value::Int(n) => n,
        _ => 0,
    }
}
fn s(v: Value<'_>) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        _ => String::new(),
    }
}

const FLAGS: &[Flag] = &[
    Flag {
        names: &["h", "help"],
        kind: Kind::Bool,
        set: |p, v| {
            p.help = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["v", "version"],
        kind: Kind::Bool,
        set: |p, v| {
            p.version = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["p", "port"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.port = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["n", "name", "server_name"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.server_name = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["a", "addr", "net"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.host = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["client_advertise"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.client_advertise = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["D", "debug"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.debug = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["V", "trace"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.trace = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["VV"],
        kind: Kind::Bool,
        set: |p, v| {
            let on = b(v);
            p.opts.trace = on;
            p.opts.trace_verbose = on;
            Ok(())
        },
    },
    Flag {
        names: &["DV"],
        kind: Kind::Bool,
        set: |p, v| {
            let on = b(v);
            p.opts.debug = on;
            p.opts.trace = on;
            Ok(())
        },
    },
    Flag {
        names: &["DVV"],
        kind: Kind::Bool,
        set: |p, v| {
            let on = b(v);
            p.opts.debug = on;
            p.opts.trace = on;
            p.opts.trace_verbose = on;
            Ok(())
        },
    },
    Flag {
        names: &["T", "logtime"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.logtime = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["logtime_utc"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.logtime_utc = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["user"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.username = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["pass"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.password = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["auth"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.authorization = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["m", "http_port"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.http_port = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["P", "pid"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.pid_file = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["ports_file_dir"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.ports_file_dir = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["l", "log"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.log_file = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["c", "config"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.config_file = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["t"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.check_config = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["sl", "signal"],
        kind: Kind::Str,
        set: |p, v| {
            p.signal = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["s", "syslog"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.syslog = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["r", "remote_syslog"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.remote_syslog = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["log_size_limit"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.log_size_limit = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["max_traced_msg_len"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.max_traced_msg_len = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["ms", "https_port"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.https_port = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["profile"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.flags_not_yet.prof_port = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["routes"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.routes = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["cluster", "cluster_listen"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.cluster_listen = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["cluster_advertise"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.cluster_advertise = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["no_advertise"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.flags_not_yet.no_advertise = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["connect_retries"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.flags_not_yet.connect_retries = i(v);
            Ok(())
        },
    },
    Flag {
        names: &["cluster_name"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.cluster_name = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["help_tls"],
        kind: Kind::Bool,
        set: |p, v| {
            p.help_tls = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["tls"],
        kind: Kind::Bool,
        set: |p, v| {
            let on = b(v);
            p.opts.flags_not_yet.tls = on;
            p.tls_given = true;
            p.tls_disabled = !on;
            Ok(())
        },
    },
    Flag {
        names: &["tlsverify"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.flags_not_yet.tls_verify = b(v);
            p.tls_given = true;
            Ok(())
        },
    },
    Flag {
        names: &["tlscert"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.tls_cert = s(v);
            p.tls_given = true;
            Ok(())
        },
    },
    Flag {
        names: &["tlskey"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.tls_key = s(v);
            p.tls_given = true;
            Ok(())
        },
    },
    Flag {
        names: &["tlscacert"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.flags_not_yet.tls_ca_cert = s(v);
            p.tls_given = true;
            Ok(())
        },
    },
    Flag {
        names: &["js", "jetstream"],
        kind: Kind::Bool,
        set: |p, v| {
            p.opts.jetstream.enabled = b(v);
            Ok(())
        },
    },
    Flag {
        names: &["sd", "store_dir"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.jetstream.store_dir = s(v);
            Ok(())
        },
    },
    Flag {
        names: &["shards"],
        kind: Kind::Int,
        set: |p, v| {
            let n = i(v);
            if !(0..=256).contains(&n) {
                return Err("value out of range".into());
            }
            p.opts.shards = n as usize;
            Ok(())
        },
    },
    Flag {
        names: &["reactor"],
        kind: Kind::Str,
        set: |p, v| {
            p.opts.reactor = match s(v).as_str() {
                "uring" => ReactorChoice::Uring,
                "uring-poll" => ReactorChoice::UringPoll,
                "mio" => ReactorChoice::Mio,
                "auto" | "" => ReactorChoice::Auto,
                _ => return Err("parse error".into()),
            };
            Ok(())
        },
    },
    Flag {
        names: &["spin_us"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.spin_us = i(v).max(0) as u64;
            Ok(())
        },
    },
    Flag {
        names: &["send_zc"],
        kind: Kind::Int,
        set: |p, v| {
            p.opts.send_zc = i(v).max(0) as u64;
            Ok(())
        },
    },
    Flag {
        names: &["sqpoll_ms"],
        kind: Kind::Int,
        set: |p, v| {
            // The kernel takes the idle time as a 32-bit count of milliseconds.
            p.opts.sqpoll_ms = i(v).clamp(0, i64::from(u32::MAX)) as u64;
            Ok(())
        },
    },
];

fn lookup(name: &str) -> Option<&'static Flag> {
    FLAGS.iter().find(|f| f.names.contains(&name))
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.ParseInt(v, 0, 64)`: optional sign, `0x`/`0o`/`0b` prefixes, a leading
/// `0` for octal, underscores between digits.
fn parse_int(v: &str) -> Result<i64, &'static str> {
    let (neg, body) = match v.as_bytes().first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, v),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(r) = lower.strip_prefix("0x") {
        (16, r.to_string(), true)
    } else if let Some(r) = lower.strip_prefix("0o") {
        (8, r.to_string(), true)
    } else if let Some(r) = lower.strip_prefix("0b") {
        (2, r.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower.clone(), false)
    };
    if digits.is_empty() {
        return Err("parse error");
    }
    if digits.contains('_') {
        // Underscores only between digits (or right after a base prefix).
        let bytes = digits.as_bytes();
        let bad = bytes.last() == Some(&b'_') || digits.contains("__") || (!prefixed && bytes.first() == Some(&b'_'));
        if bad {
            return Err("parse error");
        }
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if clean.is_empty() || !clean.chars().all(|c| c.is_digit(radix)) {
        return Err("parse error");
    }
    let mag = u128::from_str_radix(&clean, radix).map_err(|_| "value out of range")?;
    let limit = if neg { 1u128 << 63 } else { (1u128 << 63) - 1 };
    if mag > limit {
        return Err("value out of range");
    }
    Ok(if neg {
        (mag as i128).wrapping_neg() as i64
    } else {
        mag as i64
    })
}

/// An error of the flags' meaning (nats-server prints it alone and exits 1).
fn fail_plain(message: &str) -> Command {
    Command::Fail {
        message: format!("nats-server: {message}"),
        usage: false,
        code: 1,
    }
}

fn fail(message: String) -> Command {
    Command::Fail {
        message,
        usage: true,
        code: 0,
    }
}

/// Parse `args` (without the program name).
pub fn parse(args: &[String]) -> Command {
    parse_onto(args, Options::default())
}

/// Parse `args` over `base`: only the flags given change it. This is how flags override
/// the config file (nats-server parses its flags again after reading the file).
pub fn parse_onto(args: &[String], base: Options) -> Command {
    let mut p = Parsed {
        opts: base,
        ..Parsed::default()
    };
    let mut k = 0;
    while k < args.len() {
        let a = &args[k];
        if a.len() < 2 || !a.starts_with('-') {
            break;
        }
        let mut name = &a[1..];
        if name.starts_with('-') {
            name = &name[1..];
            if name.is_empty() {
                k += 1; // "--" ends the flags
                break;
            }
        }
        if name.is_empty() || name.starts_with('-') || name.starts_with('=') {
            return fail(format!("bad flag syntax: {a}"));
        }
        k += 1;
        let (name, value) = match name.find('=') {
            Some(eq) if eq > 0 => (&name[..eq], Some(&name[eq + 1..])),
            _ => (name, None),
        };
        let Some(flag) = lookup(name) else {
            return fail(format!("flag provided but not defined: -{name}"));
        };
        // The value as given (for error messages), wherever it came from.
        let mut raw = value.unwrap_or("");
        let v = match flag.kind {
            Kind::Bool => match value {
                None => Value::Bool(true),
                Some(val) => match parse_bool(val) {
                    Some(bv) => Value::Bool(bv),
                    None => return fail(format!("invalid boolean value {val:?} for -{name}: parse error")),
                },
            },
            Kind::Int | Kind::Str => {
                let val = match value {
                    Some(v) => v,
                    None => match args.get(k) {
                        Some(v) => {
                            k += 1;
                            raw = v.as_str();
                            v.as_str()
                        }
                        None => return fail(format!("flag needs an argument: -{name}")),
                    },
                };
                if flag.kind == Kind::Int {
                    match parse_int(val) {
                        Ok(n) => Value::Int(n),
                        Err(e) => return fail(format!("invalid value {val:?} for flag -{name}: {e}")),
                    }
                } else {
                    Value::Str(val)
                }
            }
        };
        if let Err(e) = (flag.set)(&mut p, v) {
            return fail(format!("invalid value {raw:?} for flag -{name}: {e}"));
        }
    }
    if p.version {
        return Command::Version;
    }
    if p.help {
        return Command::Help;
    }
    if p.help_tls {
        return Command::HelpTls;
    }
    if p.tls_given {
        // nats-server's `overrideTLS`: the flags replace the file's `tls` block;
        // `--tls=false` turns TLS off.
        if p.tls_disabled {
            p.opts.tls = None;
        } else {
            let f = &p.opts.flags_not_yet;
            if f.tls_cert.is_empty() {
                return fail_plain("TLS Server certificate must be present and valid");
            }
            if f.tls_key.is_empty() {
                return fail_plain("TLS Server private key must be present and valid");
            }
            let t = crate::transport::tls::TlsOptions {
                cert_file: f.tls_cert.clone(),
                key_file: f.tls_key.clone(),
                ca_file: f.tls_ca_cert.clone(),
                verify: f.tls_verify,
                ..Default::default()
            };
            if let Err(e) = crate::transport::tls::build_server_config(&t) {
                return fail_plain(&e.0);
            }
            p.opts.tls = Some(t);
        }
    }
    if let Some(arg) = args.get(k) {
        return match arg.to_lowercase().as_str() {
            "version" => Command::Version,
            "help" => Command::Help,
            _ => Command::Fail {
                message: format!("nats-server: unrecognized command: {arg:?}"),
                usage: false,
                code: 1,
            },
        };
    }
    if !p.signal.is_empty() {
        return Command::Signal(p.signal);
    }
    Command::Run(Box::new(p.opts))
}

/// `--help_tls`.
pub const TLS_USAGE: &str = "
TLS is configured in the tls block of a configuration file:

    tls {
        cert_file:      \"./certs/server-cert.pem\"
        key_file:       \"./certs/server-key.pem\"
        ca_file:        \"./certs/ca.pem\"
        verify:         true
        verify_and_map: true
        timeout:        2
        handshake_first: false

        cipher_suites: [
            \"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\",
            \"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\"
        ]
        curve_preferences: [
            \"CurveP256\",
            \"CurveP384\"
        ]
    }

Cipher suites and curves use Go's names; those rustls implements are used (TLS 1.3
suites are always on). Curves: X25519, CurveP256, CurveP384.

From the command line: --tls --tlscert <file> --tlskey <file> [--tlscacert <file>]
[--tlsverify].
";

/// The usage text: nats-server's sections and wording, then what rnats does differently
/// and the flags only rnats has (`RNATS_ONLY_FLAGS`, each listed under "rnats Options").
pub const USAGE: &str = "
Usage: nats-server [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222)
    -n, --name
        --server_name <server_name>  Server name (default: auto)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring
    -ms,--https_port <port>          Use port for https monitoring
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to nats-server process (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path to a PID file (e.g. /var/run/nats-server.pid)
        --client_advertise <string>  Client URL to advertise to other servers
        --ports_file_dir <dir>       Creates a ports file in the specified directory (<executable_name>_<pid>.ports).

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
    -s, --syslog                     Log to syslog or windows event log
    -r, --remote_syslog <addr>       Syslog server addr (udp://localhost:514)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (traces system account as well)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (traces system account as well)
        --log_size_limit <limit>     Logfile size limit (default: auto)
        --max_traced_msg_len <len>   Maximum printable length for traced messages (default: unlimited)

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Cluster Options (accepted; rnats has no clustering yet, so --routes and --cluster
(--cluster_listen) are refused at startup, the others have no effect):
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries
        --cluster_listen <url>       Cluster url from which members can solicit routes

Profiling Options (accepted; refused at startup, rnats has no Go profiler):
        --profile <port>             Profiling HTTP port

rnats Options (not nats-server flags):
        --shards <n>                 Number of shards, threads that each own their connections
                                     (default: 0, one per usable CPU; at most 256)
        --reactor <auto|uring|uring-poll|mio>
                                     Event loop: io_uring, or the portable mio reactor (default: auto,
                                     io_uring when it can be set up, else mio with a log line why);
                                     uring-poll: io_uring readiness polls, no completion I/O
        --spin_us <us>               Microseconds an idle shard busy-polls before sleeping, while
                                     request/reply traffic flows (default: 100; 0: never)
        --sqpoll_ms <ms>             io_uring: a kernel thread per shard submits and completes its I/O,
                                     polling this long after its last work (default: 0, none)
        --send_zc <bytes>            io_uring: sends of at least this many bytes go zero-copy, for NICs
                                     that read user memory (default: 0, never; loopback gains nothing)

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
        --help_tls                   TLS help
";

/// The flags rnats has and nats-server does not: `USAGE` lists each of them (a test
/// checks it, and that every other flag is nats-server's).
pub const RNATS_ONLY_FLAGS: &[&str] = &["shards", "reactor", "spin_us", "sqpoll_ms", "send_zc"];

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Command {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn opts(args: &[&str]) -> Options {
        match run(args) {
            Command::Run(o) => *o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn go_flag_spellings() {
        assert_eq!(opts(&["-p", "4333"]).port, 4333);
        assert_eq!(opts(&["--port", "4333"]).port, 4333);
        assert_eq!(opts(&["-port=4333"]).port, 4333);
        assert_eq!(opts(&["--port=4333"]).port, 4333);
        assert_eq!(opts(&["-p", "-1"]).port, -1);
        assert_eq!(opts(&["-p", "0x10"]).port, 16);
        assert_eq!(opts(&["-a", "127.0.0.1"]).host, "127.0.0.1");
        assert_eq!(opts(&["--net", "::1"]).host, "::1");
        assert_eq!(opts(&["-n", "x"]).server_name, "x");
        assert_eq!(opts(&["--server_name=y"]).server_name, "y");
    }

    #[test]
    fn booleans_and_combined_short_flags() {
        let o = opts(&["-DV"]);
        assert!(o.debug && o.trace && !o.trace_verbose);
        let o = opts(&["-DVV"]);
        assert!(o.debug && o.trace && o.trace_verbose);
        let o = opts(&["-D", "-T=false"]);
        assert!(o.debug && !o.logtime);
        assert!(opts(&[]).logtime);
        // `-D false`: "false" is a positional argument, as in Go.
        match run(&["-D", "false"]) {
            Command::Fail {
                message,
                code: 1,
                usage: false,
            } => {
                assert_eq!(message, "nats-server: unrecognized command: \"false\"")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_match_go() {
        let msg = |c: Command| match c {
            Command::Fail {
                message,
                usage: true,
                code: 0,
            } => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(msg(run(&["--foo"])), "flag provided but not defined: -foo");
        assert_eq!(
            msg(run(&["-p", "abc"])),
            "invalid value \"abc\" for flag -p: parse error"
        );
        assert_eq!(msg(run(&["-p"])), "flag needs an argument: -p");
        assert_eq!(msg(run(&["-D=x"])), "invalid boolean value \"x\" for -D: parse error");
        assert_eq!(msg(run(&["---x"])), "bad flag syntax: ---x");
        assert_eq!(
            msg(run(&["-p", "99999999999999999999"])),
            "invalid value \"99999999999999999999\" for flag -p: value out of range"
        ); // A setter's refusal names the value whether it came after `=` or separately.
        for args in [&["--shards", "300"][..], &["--shards=300"][..]] {
            assert_eq!(
                msg(run(args)),
                "invalid value \"300\" for flag -shards: value out of range"
            );
        }
    }

    #[test]
    fn version_help_and_positionals() {
        assert!(matches!(run(&["-v"]), Command::Version));
        assert!(matches!(run(&["--version"]), Command::Version));
        assert!(matches!(run(&["version"]), Command::Version));
        assert!(matches!(run(&["-h"]), Command::Help));
        assert!(matches!(run(&["HELP"]), Command::Help));
        assert!(matches!(run(&["--", "-p", "1"]), Command::Fail { code: 1, .. }));
    }

    #[test]
    fn config_check_signal_and_logging_flags() {
        let o = opts(&[
            "-c",
            "a.conf",
            "-t",
            "-s",
            "-r",
            "udp://h:514",
            "--log_size_limit",
            "1000",
        ]);
        assert_eq!((o.config_file.as_str(), o.check_config), ("a.conf", true));
        assert!(o.syslog);
        assert_eq!((o.remote_syslog.as_str(), o.log_size_limit), ("udp://h:514", 1000));
        assert!(matches!(run(&["--signal", "reload=1"]), Command::Signal(s) if s == "reload=1"));
        assert!(matches!(run(&["-sl=ldm"]), Command::Signal(s) if s == "ldm"));
        // Flags over a base (the config file): only what is given changes.
        let base = Options {
            max_payload: 7,
            debug: true,
            ..Options::default()
        };
        match parse_onto(&["-p".to_string(), "5".to_string()], base) {
            Command::Run(o) => assert_eq!((o.port, o.max_payload, o.debug), (5, 7, true)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reference_flags_of_missing_features_are_accepted_and_kept() {
        let o = opts(&[
            "-sd",
            "/tmp/js",
            "--cluster_name",
            "c1",
            "--cluster_advertise=h:1",
            "--no_advertise",
            "--connect_retries",
            "3",
        ]);
        assert_eq!(o.jetstream.store_dir, "/tmp/js");
        let f = &o.flags_not_yet;
        assert_eq!(
            (
                f.cluster_name.as_str(),
                f.cluster_advertise.as_str(),
                f.no_advertise,
                f.connect_retries
            ),
            ("c1", "h:1", true, 3)
        );
        // Tuning a cluster that is not there, or naming a store without JetStream, turns
        // nothing on: accepted as the reference accepts them.
        assert_eq!(f.feature(), None);
        assert_eq!(o.refuse_missing_features(), Ok(()));
        assert_eq!(opts(&["--store_dir=/x"]).jetstream.store_dir, "/x");
        // -js turns JetStream on.
        for args in [&["-js"][..], &["--jetstream=true"][..], &["-jetstream"][..]] {
            let o = opts(args);
            assert!(o.jetstream.enabled, "{args:?}");
            assert_eq!(o.flags_not_yet.feature(), None, "{args:?}");
            assert_eq!(o.refuse_missing_features(), Ok(()));
        }
        let refused = [
            (
                &["--cluster", "nats://127.0.0.1:6222"][..],
                "clustering (--cluster, --cluster_listen, --routes)",
            ),
            (
                &["--cluster_listen=nats://127.0.0.1:6222", "--routes", "nats://h:1"][..],
                "clustering (--cluster, --cluster_listen, --routes)",
            ),
            (&["--profile", "6060"][..], "profiling (--profile)"),
        ];
        for (args, feature) in refused {
            let o = opts(args);
            assert_eq!(
                o.refuse_missing_features(),
                Err(crate::server::options::OptionsError::NotYet(feature.to_string())),
                "{args:?}"
            );
        }
        assert!(!opts(&["-js=false"]).jetstream.enabled);
        assert_eq!(
            opts(&["--routes", "nats://h:1"]).validate().unwrap_err().to_string(),
            "solicited routes require cluster capabilities, e.g. --cluster"
        );
    }

    #[test]
    fn reference_flag_value_types() {
        let msg = |c: Command| match c {
            Command::Fail { message, .. } => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            msg(run(&["--connect_retries", "x"])),
            "invalid value \"x\" for flag -connect_retries: parse error"
        );
        assert_eq!(msg(run(&["-ms", "x"])), "invalid value \"x\" for flag -ms: parse error");
        assert_eq!(msg(run(&["-sd"])), "flag needs an argument: -sd");
        assert_eq!(
            msg(run(&["--no_advertise=x"])),
            "invalid boolean value \"x\" for -no_advertise: parse error"
        );
        assert!(matches!(run(&["--help_tls"]), Command::HelpTls));
        // The --tls* flags need a certificate and a key, as in the reference.
        assert_eq!(
            msg(run(&["--tls"])),
            "nats-server: TLS Server certificate must be present and valid"
        );
        assert_eq!(
            msg(run(&["--tlsverify", "--tlscert", "c.pem"])),
            "nats-server: TLS Server private key must be present and valid"
        );
        assert_eq!(
            msg(run(&[
                "--tlscert",
                "/nonexistent/c.pem",
                "--tlskey",
                "/nonexistent/k.pem"
            ])),
            "nats-server: error parsing X509 certificate/key pair: open /nonexistent/c.pem: no such file or directory"
        );
        // --tls=false turns TLS off whatever else is given.
        assert!(opts(&["--tls=false", "--tlscert", "/nonexistent/c.pem"]).tls.is_none());
    }

    /// The flag names a usage text lists (`-x`, `--name`, `-ms,--https_port`, ...).
    fn listed_flags(text: &str) -> std::collections::BTreeSet<&str> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .filter(|t| t.starts_with('-') && t.len() > 1)
            .map(|t| t.trim_start_matches('-'))
            .collect()
    }

    #[test]
    fn usage_lists_every_flag() {
        let listed = listed_flags(USAGE);
        for flag in FLAGS {
            for name in flag.names {
                // nats-server accepts `--logtime_utc` without listing it; so does rnats.
                if *name != "logtime_utc" {
                    assert!(listed.contains(name), "--help does not list -{name}");
                }
            }
        }
        let start = USAGE.find("rnats Options").unwrap_or(0);
        let end = USAGE.find("Common Options").unwrap_or(0);
        let section = listed_flags(USAGE.get(start..end).unwrap_or(""));
        for name in RNATS_ONLY_FLAGS {
            assert!(lookup(name).is_some(), "{name} is not a flag");
            assert!(section.contains(name), "--{name} is not under \"rnats Options\"");
        }
        assert_eq!(section.len(), RNATS_ONLY_FLAGS.len(), "{section:?}");
    }

    #[test]
    fn ints_like_strconv() {
        assert_eq!(parse_int("010"), Ok(8));
        assert_eq!(parse_int("0b101"), Ok(5));
        assert_eq!(parse_int("1_000"), Ok(1000));
        assert_eq!(parse_int("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int("9223372036854775808"), Err("value out of range"));
        assert_eq!(parse_int("_1"), Err("parse error"));
        assert_eq!(parse_int(""), Err("parse error"));
        assert_eq!(parse_int("08"), Err("parse error"));
    }
}
