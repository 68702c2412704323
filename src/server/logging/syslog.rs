//! Syslog output in the formats of Go's `log/syslog`, which nats-server uses:
//! - local (`-s`/`syslog: true`): `/dev/log`, `/var/run/syslog` or `/var/run/log`,
//!   facility daemon, `<PRI>Jan _2 15:04:05 tag[pid]: message\n`;
//! - remote (`-r`/`remote_syslog`): `udp://host:port`, `tcp://host:port` or
//!   `unix:///path` (a stream socket), facility kern,
//!   `<PRI>2006-01-02T15:04:05Z07:00 hostname tag[pid]: message\n`.
//!
//! The tag is the executable's name. Levels map to severities: info and trace notice,
//! warn warning, error err, debug debug, fatal crit.

use super::{LogError, Lvl};
use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::time::SystemTime;

const LOG_DAEMON: u8 = 3 << 3;
const LOG_KERN: u8 = 0;

enum Conn {
    UnixGram(UnixDatagram),
    UnixStream(UnixStream),
    Udp(UdpSocket),
    Tcp(TcpStream),
}

impl Conn {
    fn send(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Conn::UnixGram(s) => s.send(data).map(|_| ()),
            Conn::UnixStream(s) => s.write_all(data),
            Conn::Udp(s) => s.send(data).map(|_| ()),
            Conn::Tcp(s) => s.write_all(data),
        }
    }
}

/// Where to (re)connect.
#[derive(Clone)]
enum Target {
    Local,
    Udp(String),
    Tcp(String),
    Unix(String),
}

pub struct Syslog {
    conn: Conn,
    target: Target,
    facility: u8,
    tag: String,
    hostname: String,
    pid: u32,
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(buf.get(..end).unwrap_or_default()).into_owned()
}

fn connect(target: &Target) -> std::io::Result<Conn> {
    match target {
        Target::Local => {
            for path in ["/dev/log", "/var/run/syslog", "/var/run/log"] {
                if let Ok(s) = UnixDatagram::unbound().and_then(|s| s.connect(path).map(|_| s)) {
                    return Ok(Conn::UnixGram(s));
                }
                if let Ok(s) = UnixStream::connect(path) {
                    return Ok(Conn::UnixStream(s));
                }
            }
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "Unix syslog delivery error",
            ))
        }
        Target::Udp(addr) => {
            use std::net::ToSocketAddrs;
            let sa = addr
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"))?;
            let s = UdpSocket::bind(if sa.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" })?;
            s.connect(sa)?;
            Ok(Conn::Udp(s))
        }
        Target::Tcp(addr) => Ok(Conn::Tcp(TcpStream::connect(addr.as_str())?)),
        Target::Unix(path) => Ok(Conn::UnixStream(UnixStream::connect(path)?)),
    }
}

/// `scheme://host[:port][/path]` as Go's `url.Parse` splits it, for the three schemes.
fn parse_target(url: &str) -> Result<Target, LogError> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (host, path) = match rest.find('/') {
        Some(i) => (rest.get(..i).unwrap_or(""), rest.get(i..).unwrap_or("")),
        None => (rest, ""),
    };
    match scheme {
        "udp" => Ok(Target::Udp(host.to_string())),
        "tcp" => Ok(Target::Tcp(host.to_string())),
        "unix" => Ok(Target::Unix(path.to_string())),
        other => Err(LogError::Network(other.to_string())),
    }
}

impl Syslog {
    pub fn local() -> Result<Syslog, LogError> {
        let conn = connect(&Target::Local).map_err(|e| LogError::Syslog(e.to_string()))?;
        Ok(Syslog {
            conn,
            target: Target::Local,
            facility: LOG_DAEMON,
            tag: crate::server::signals::process_name(),
            hostname: hostname(),
            pid: std::process::id(),
        })
    }

    pub fn remote(url: &str) -> Result<Syslog, LogError> {
        let target = parse_target(url)?;
        let conn = connect(&target).map_err(|e| LogError::Syslog(dial_error(&target, &e)))?;
        Ok(Syslog {
            conn,
            target,
            facility: LOG_KERN,
            tag: crate::server::signals::process_name(),
            hostname: hostname(),
            pid: std::process::id(),
        })
    }

    fn format(&self, lvl: Lvl, msg: &str) -> String {
        let severity: u8 = match lvl {
            Lvl::Fatal => 2,
            Lvl::Error => 3,
            Lvl::Warn => 4,
            Lvl::Info | Lvl::Trace => 5,
            Lvl::Debug => 7,
        };
        let pri = self.facility | severity;
        let nl = if msg.ends_with('\n') { "" } else { "\n" };
        let now = SystemTime::now();
        if matches!(self.target, Target::Local) {
            format!(
                "<{pri}>{} {}[{}]: {msg}{nl}",
                super::time::stamp(now),
                self.tag,
                self.pid
            )
        } else {
            format!(
                "<{pri}>{} {} {}[{}]: {msg}{nl}",
                super::time::rfc3339(now),
                self.hostname,
                self.tag,
                self.pid
            )
        }
    }

    /// Send one message; on failure reconnect once and retry, as Go's writer does.
    pub fn write(&mut self, lvl: Lvl, msg: &str) {
        let line = self.format(lvl, msg);
        if self.conn.send(line.as_bytes()).is_ok() {
            return;
        }
        if let Ok(c) = connect(&self.target) {
            self.conn = c;
            let _ = self.conn.send(line.as_bytes());
        }
    }
}

/// Go's `net.Dial` error text: `dial tcp 127.0.0.1:1: connect: connection refused`.
fn dial_error(t: &Target, e: &std::io::Error) -> String {
    let (net, addr) = match t {
        Target::Local => ("unixgram", String::new()),
        Target::Udp(a) => ("udp", a.clone()),
        Target::Tcp(a) => ("tcp", a.clone()),
        Target::Unix(p) => ("unix", p.clone()),
    };
    format!("dial {net} {addr}: connect: {}", super::go_os_error(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert!(matches!(parse_target("udp://localhost:514"), Ok(Target::Udp(h)) if h == "localhost:514"));
        assert!(matches!(parse_target("tcp://1.2.3.4:5"), Ok(Target::Tcp(h)) if h == "1.2.3.4:5"));
        assert!(matches!(parse_target("unix:///tmp/x.sock"), Ok(Target::Unix(p)) if p == "/tmp/x.sock"));
        assert!(matches!(parse_target("http://x"), Err(LogError::Network(s)) if s == "http"));
    }

    #[test]
    fn remote_udp_format() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let url = format!("udp://{}", rx.local_addr().unwrap());
        let mut s = Syslog::remote(&url).unwrap();
        s.write(Lvl::Warn, "hello");
        let mut buf = [0u8; 512];
        let n = rx.recv(&mut buf).unwrap();
        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(got.starts_with("<4>"), "{got}");
        assert!(got.ends_with(&format!("[{}]: hello\n", std::process::id())), "{got}");
    }
}
