//! Exclusive TCP listeners.
//!
//! nats-server binds its ports exclusively: a second server on the same port fails with
//! "address already in use". Runtime helpers that bind for you often set `SO_REUSEPORT`, which would
//! let a second process silently steal half the connections, so listeners are made here
//! with `SO_REUSEADDR` only (fast restarts) and handed to whichever reactor accepts.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};

/// Bind `addr` exclusively with the given backlog. The listener is non-blocking.
pub fn bind_exclusive(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    #[cfg(unix)]
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // Match Go: an IPv6 wildcard listener also accepts IPv4.
        let _ = sock.set_only_v6(false);
    }
    sock.bind(&addr.into())?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_bind_fails_with_addr_in_use() {
        let a = bind_exclusive("127.0.0.1:0".parse().unwrap(), 128).unwrap();
        let addr = a.local_addr().unwrap();
        let err = bind_exclusive(addr, 128).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }
}
