//! systemd's service notification protocol (sd_notify(3)), spoken directly:
//! one datagram of `KEY=VALUE` lines to the Unix socket named by
//! `NOTIFY_SOCKET` (a path, or an abstract name written `@name`). No
//! libsystemd: the protocol is one `sendto`, and a node that is not run by
//! systemd (no `NOTIFY_SOCKET`) sends nothing.
//!
//! Guarantee: notifying never fails or stalls a node. A missing socket, a
//! refused or full one is reported once on the log and otherwise ignored;
//! each send waits at most [`SEND_TIMEOUT`].
//!
//! The watchdog (`WATCHDOG_USEC`, and `WATCHDOG_PID` when systemd sets it
//! for another process) is pinged by the threads that prove the node alive,
//! through [`Watchdog`]: the Redis heartbeat thread, and on a node served
//! only by SolidEngine the lease extender.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::log::log;

/// The longest a notification may wait for room in the socket's buffer.
pub const SEND_TIMEOUT: Duration = Duration::from_millis(250);

/// Where notifications go, and how often the watchdog wants a ping.
#[derive(Debug)]
pub struct Notifier {
    addr: SocketAddr,
    shown: String,
    /// Half of WATCHDOG_USEC (sd_watchdog_enabled(3) advises pinging at
    /// least that often); None without a watchdog for this process.
    watchdog: Option<Duration>,
    socket: OnceLock<Option<UnixDatagram>>,
    warned: AtomicBool,
}

impl Notifier {
    /// From the values systemd sets: `socket` (NOTIFY_SOCKET), `usec`
    /// (WATCHDOG_USEC), `pid` (WATCHDOG_PID) and this process's id. None
    /// when there is no socket to notify.
    pub fn from_vars(socket: Option<&str>, usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Notifier> {
        let socket = socket.filter(|s| !s.is_empty())?;
        let addr = match socket.strip_prefix('@') {
            Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
            None => SocketAddr::from_pathname(socket),
        };
        let addr = match addr {
            Ok(a) => a,
            Err(e) => {
                log(
                    "WARN",
                    &format!("NOTIFY_SOCKET {socket:?} is not a Unix socket address ({e}); systemd is not notified"),
                );
                return None;
            }
        };
        // The watchdog is this process's only when WATCHDOG_PID, if set,
        // names it: a child that inherited the variables must not keep a
        // dead parent's service alive.
        let ours = pid.map(|p| p.trim().parse::<u32>().ok() == Some(own_pid)).unwrap_or(true);
        let watchdog = usec
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|u| *u > 0 && ours)
            .map(|u| Duration::from_micros(u / 2));
        Some(Notifier {
            addr,
            shown: socket.to_owned(),
            watchdog,
            socket: OnceLock::new(),
            warned: AtomicBool::new(false),
        })
    }

    /// The process's notifier, read from the environment once.
    pub fn from_env() -> Option<&'static Notifier> {
        static NOTIFIER: OnceLock<Option<Notifier>> = OnceLock::new();
        NOTIFIER
            .get_or_init(|| {
                let var = |name: &str| std::env::var(name).ok();
                Notifier::from_vars(
                    var("NOTIFY_SOCKET").as_deref(),
                    var("WATCHDOG_USEC").as_deref(),
                    var("WATCHDOG_PID").as_deref(),
                    std::process::id(),
                )
            })
            .as_ref()
    }

    /// How often the watchdog is pinged, when it is enabled for this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends `state` (newline-separated `KEY=VALUE` assignments); true when
    /// the datagram was sent.
    pub fn send(&self, state: &str) -> bool {
        let socket = self.socket.get_or_init(|| {
            let s = UnixDatagram::unbound().ok()?;
            s.set_write_timeout(Some(SEND_TIMEOUT)).ok()?;
            Some(s)
        });
        let out = match socket {
            Some(s) => s.send_to_addr(state.as_bytes(), &self.addr).map(drop),
            None => Err(std::io::Error::other("no datagram socket")),
        };
        match out {
            Ok(()) => true,
            Err(e) => {
                // Once: a missing socket stays missing, and the node runs on.
                if !self.warned.swap(true, Ordering::Relaxed) {
                    log(
                        "WARN",
                        &format!("notifying systemd at {} failed: {e}; the node runs on without notifying", self.shown),
                    );
                }
                false
            }
        }
    }
}

/// Sends `state` to systemd when the process runs under it; false otherwise.
pub fn notify(state: &str) -> bool {
    Notifier::from_env().is_some_and(|n| n.send(state))
}

/// The watchdog pings of one thread: due every half WATCHDOG_USEC.
pub struct Watchdog {
    notifier: &'static Notifier,
    every: Duration,
    next: Instant,
}

impl Watchdog {
    /// None when this process has no watchdog to ping.
    pub fn from_env() -> Option<Watchdog> {
        let notifier = Notifier::from_env()?;
        Watchdog::new(notifier)
    }

    pub fn new(notifier: &'static Notifier) -> Option<Watchdog> {
        let every = notifier.watchdog_interval()?;
        Some(Watchdog { notifier, every, next: Instant::now() })
    }

    /// When the next ping is due; the thread wakes by then.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Pings when one is due. Called by the thread after each round of its
    /// work, whatever the backend answered (a Redis outage is no reason
    /// for systemd to restart a node, which reconnects on its own); a
    /// thread that stops looping stops pinging.
    pub fn tick(&mut self, now: Instant) {
        if now >= self.next {
            self.notifier.send("WATCHDOG=1");
            self.next = now + self.every;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(n: Notifier) -> &'static Notifier {
        Box::leak(Box::new(n))
    }

    #[test]
    fn sends_a_datagram_to_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("solid-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::from_vars(path.to_str(), None, None, 1).unwrap();
        assert!(n.send("READY=1\nSTATUS=running"));
        let mut buf = [0u8; 256];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=running");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sends_to_an_abstract_name() {
        let name = format!("solid-notify-test-{}", std::process::id());
        let server = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        let n = Notifier::from_vars(Some(&format!("@{name}")), None, None, 1).unwrap();
        assert!(n.send("STOPPING=1"));
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1");
    }

    #[test]
    fn a_missing_socket_fails_the_send_not_the_caller() {
        let n = Notifier::from_vars(Some("/nonexistent/solid-jobs/notify.sock"), None, None, 1).unwrap();
        assert!(!n.send("READY=1"));
        assert!(!n.send("READY=1"));
    }

    #[test]
    fn no_socket_no_notifier() {
        assert!(Notifier::from_vars(None, Some("1000000"), None, 1).is_none());
        assert!(Notifier::from_vars(Some(""), None, None, 1).is_none());
    }

    #[test]
    fn the_watchdog_is_half_of_watchdog_usec_and_only_for_its_pid() {
        let every = |usec: Option<&str>, pid: Option<&str>| {
            Notifier::from_vars(Some("@x"), usec, pid, 42).unwrap().watchdog_interval()
        };
        assert_eq!(every(Some("3000000"), None), Some(Duration::from_millis(1500)));
        assert_eq!(every(Some("3000000"), Some("42")), Some(Duration::from_millis(1500)));
        assert_eq!(every(Some("3000000"), Some("41")), None);
        assert_eq!(every(Some("0"), None), None);
        assert_eq!(every(Some("soon"), None), None);
        assert_eq!(every(None, None), None);
    }

    #[test]
    fn the_watchdog_pings_when_due_and_not_before() {
        let name = format!("solid-watchdog-test-{}", std::process::id());
        let server = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        server.set_nonblocking(true).unwrap();
        let n = leak(Notifier::from_vars(Some(&format!("@{name}")), Some("2000000"), None, 1).unwrap());
        let mut w = Watchdog::new(n).unwrap();
        let start = Instant::now();
        w.tick(start);
        w.tick(start + Duration::from_millis(500));
        let mut buf = [0u8; 64];
        assert_eq!(server.recv(&mut buf).unwrap(), "WATCHDOG=1".len());
        assert!(server.recv(&mut buf).is_err(), "a second ping before the interval");
        assert_eq!(w.next(), start + Duration::from_secs(1));
        w.tick(start + Duration::from_secs(1));
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
    }
}
