//! Exclusive TCP listeners.
//!
//! nats-server binds its ports exclusively: a second server on the same port fails with
//! "address already in use". Runtime helpers that bind for you often set `SO_REUSEPORT`, which would
//! let a second process silently steal half the connections, so listeners are made here
//! with `SO_REUSEADDR` only (fast restarts) and handed to whichever reactor accepts.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

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

/// [`bind_exclusive`], trying again for up to `patience` while the address is in use. A
/// server killed a moment ago may still hold its port: the kernel releases an io_uring
/// ring's resources (a listener with an accept in flight among them) shortly after the
/// process is gone (about 10 ms measured here), and a supervisor or test harness that
/// starts the next server at once would otherwise find the port taken.
pub fn bind_exclusive_patiently(addr: SocketAddr, backlog: i32, patience: Duration) -> io::Result<TcpListener> {
    let deadline = Instant::now() + patience;
    loop {
        match bind_exclusive(addr, backlog) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
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

    #[test]
    fn patient_bind_waits_for_the_port_then_gives_up() {
        let a = bind_exclusive("127.0.0.1:0".parse().unwrap(), 128).unwrap();
        let addr = a.local_addr().unwrap();
        // Released while the second bind waits: it gets the port.
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(a);
        });
        let b = bind_exclusive_patiently(addr, 128, Duration::from_secs(5)).unwrap();
        t.join().unwrap();
        // Held for good: the error after the patience runs out.
        let start = Instant::now();
        let err = bind_exclusive_patiently(addr, 128, Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert!(start.elapsed() >= Duration::from_millis(100));
        drop(b);
    }
}
