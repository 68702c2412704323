//! A wake-up that any thread can trigger and any reactor can wait on: one byte written
//! into a non-blocking socketpair. glommio has no generic eventfd future, but it can read
//! a Unix socket; mio shards use `mio::Waker` instead.

use crate::mesh::Notify;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The sending half. Writing never blocks: if the socket buffer is full a wake-up is
/// already pending, which is all a notification needs to convey.
pub struct SocketNotify {
    fd: OwnedFd,
}

/// Create a notifier and the raw fd the waiting side reads from (the caller owns it).
pub fn socket_notify() -> io::Result<(SocketNotify, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two fds into the array on success; we own both afterwards.
    let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | sock_flags(), 0, fds.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created by socketpair and are owned by nobody else.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    for fd in [&a, &b] {
        set_nonblocking(fd.as_raw_fd())?;
    }
    Ok((SocketNotify { fd: a }, b))
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn sock_flags() -> libc::c_int {
    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn sock_flags() -> libc::c_int {
    0
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Notify for SocketNotify {
    fn notify(&self) {
        let b = [1u8];
        // SAFETY: writing one byte from a live stack buffer into an fd we own.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), b.as_ptr().cast(), 1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_makes_the_other_end_readable() {
        let (n, rx) = socket_notify().unwrap();
        n.notify();
        n.notify();
        let mut buf = [0u8; 8];
        // SAFETY: reading into a live stack buffer from an fd we own.
        let r = unsafe { libc::read(rx.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(r, 2);
        let r = unsafe { libc::read(rx.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(r, -1, "drained socket would block");
    }
}
