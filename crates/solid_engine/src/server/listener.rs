//! Listening sockets, accepted streams and the shutdown handle.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::config::ListenAddr;
use crate::error::{Error, Result};

/// An already-bound listening socket. The server owns it from `run` on and
/// removes a Unix socket's file when it stops.
pub enum Listener {
    Tcp(TcpListener),
    /// `inode`: (device, inode) of the socket file we created, so shutdown
    /// never removes a file that another server put at the same path.
    Unix {
        listener: UnixListener,
        path: PathBuf,
        inode: Option<(u64, u64)>,
    },
}

fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Listener {
    /// Binds one address. A Unix socket file left by a dead server is
    /// removed first (a live one is an error); the new file is mode 0600.
    pub fn bind(addr: &ListenAddr) -> Result<Listener> {
        match addr {
            ListenAddr::Tcp(host_port) => TcpListener::bind(host_port.as_str())
                .map(Listener::Tcp)
                .map_err(|e| Error::Config(format!("cannot listen on tcp://{host_port}: {e}"))),
            ListenAddr::Unix(path) => Listener::bind_unix(path),
        }
    }

    pub fn bind_unix(path: &Path) -> Result<Listener> {
        let fail = |e: io::Error| Error::Config(format!("cannot listen on unix://{}: {e}", path.display()));
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(fail(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a socket")));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(fail(io::Error::new(io::ErrorKind::AddrInUse, "another server is listening")));
            }
            std::fs::remove_file(path).map_err(fail)?;
        }
        // Created 0600 from the start: with the default umask the socket
        // would be reachable by others between bind and chmod. The umask is
        // process-wide, so it is restored at once; the binary binds before it
        // starts any thread.
        let previous = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(path);
        unsafe { libc::umask(previous) };
        let listener = bound.map_err(fail)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
        Ok(Listener::Unix { listener, path: path.to_path_buf(), inode: inode(path) })
    }

    /// The bound address, e.g. `tcp://127.0.0.1:40123` after binding port 0.
    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => match l.local_addr() {
                Ok(addr) => format!("tcp://{addr}"),
                Err(_) => "tcp://?".into(),
            },
            Listener::Unix { path, .. } => format!("unix://{}", path.display()),
        }
    }

    pub(crate) fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Tcp(l) => {
                let (stream, _) = l.accept()?;
                stream.set_nodelay(true)?;
                Ok(Stream::Tcp(stream))
            }
            Listener::Unix { listener, .. } => Ok(Stream::Unix(listener.accept()?.0)),
        }
    }

    /// Unblocks a thread sitting in `accept`. shutdown(2) on a listening
    /// socket makes a blocked accept fail at once on Linux, even when the
    /// socket file was removed or replaced behind our back; connecting to
    /// ourselves is the fallback.
    pub(crate) fn wake(&self) {
        use std::os::fd::AsRawFd;
        let fd = match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix { listener, .. } => listener.as_raw_fd(),
        };
        // SAFETY: `fd` is a valid open socket owned by `self` for this call.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        match self {
            Listener::Tcp(l) => {
                if let Ok(mut addr) = l.local_addr() {
                    if addr.ip().is_unspecified() {
                        let loopback: std::net::IpAddr =
                            if addr.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() };
                        addr.set_ip(loopback);
                    }
                    let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
                }
            }
            Listener::Unix { path, .. } => {
                let _ = UnixStream::connect(path);
            }
        }
    }

    pub(crate) fn remove_socket_file(&self) {
        if let Listener::Unix { path, inode: Some(ours), .. } = self {
            if inode(path) == Some(*ours) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Binds every configured address; nothing is left bound on error.
pub fn bind_all(addrs: &[ListenAddr]) -> Result<Vec<Listener>> {
    let mut out = Vec::new();
    for addr in addrs {
        match Listener::bind(addr) {
            Ok(l) => out.push(l),
            Err(e) => {
                out.iter().for_each(Listener::remove_socket_file);
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// A connected client socket.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    pub(crate) fn set_nonblocking(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.set_nonblocking(true),
            Stream::Unix(s) => s.set_nonblocking(true),
        };
    }

    /// SO_RCVTIMEO: a read waiting longer fails with WouldBlock/TimedOut.
    /// Shared by every handle of the socket; writes are not affected.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            Stream::Unix(s) => s.set_read_timeout(timeout),
        }
    }

    pub(crate) fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Asks a running server to stop; cloneable, usable from signal handlers'
/// threads and tests.
#[derive(Clone, Default)]
pub struct ShutdownHandle(Arc<(Mutex<bool>, Condvar)>);

impl ShutdownHandle {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn trigger(&self) {
        *self.0 .0.lock() = true;
        self.0 .1.notify_all();
    }

    pub fn is_triggered(&self) -> bool {
        *self.0 .0.lock()
    }

    /// Blocks until triggered.
    pub fn wait(&self) {
        let mut flag = self.0 .0.lock();
        while !*flag {
            self.0 .1.wait(&mut flag);
        }
    }

    /// Blocks up to `timeout`; returns whether shutdown was triggered.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let mut flag = self.0 .0.lock();
        if !*flag {
            self.0 .1.wait_for(&mut flag, timeout);
        }
        *flag
    }
}
