//! Redis connections: a small checkout pool for request/response callers
//! (enqueue, failure handling) and a reconnecting connection with backoff for
//! the dispatcher's long-lived threads.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{Client, Connection};

use crate::error::{Error, Result};
use crate::redact::redact;

/// How long to wait for a TCP connect, and for any reply. A reply slower than
/// this is treated as a broken connection and retried elsewhere.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per pool; more callers at once simply connect.
const POOL_KEEP: usize = 32;

/// Which server a connector reaches. SolidEngine speaks RESP, so both go
/// through the redis crate; errors are named for the one they came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Redis,
    Engine,
}

#[derive(Clone)]
pub struct Connector {
    client: Client,
    url: String,
    /// The URL as the user wrote it, credentials redacted: the only form
    /// that goes into error messages.
    display: String,
    backend: Backend,
}

impl Connector {
    pub fn new(url: &str) -> Result<Self> {
        let client =
            Client::open(url).map_err(|e| Error::Invalid(redact(&format!("invalid Redis URL {url:?}: {e}"))))?;
        Ok(Connector { client, url: url.to_owned(), display: redact(url), backend: Backend::Redis })
    }

    /// The same connector, for SolidEngine reached at `user_url` (what
    /// messages show instead of the converted `redis://` form).
    pub fn for_engine(self, user_url: &str) -> Self {
        Connector { display: redact(user_url), backend: Backend::Engine, ..self }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// `e` named for this connector's backend.
    pub fn tag(&self, e: Error) -> Error {
        match self.backend {
            Backend::Redis => e,
            Backend::Engine => e.on_engine(),
        }
    }

    pub fn connect(&self) -> Result<Connection> {
        let conn = self
            .client
            .get_connection_with_timeout(CONNECT_TIMEOUT)
            .map_err(|e| self.tag(Error::Connection(format!("{} ({})", e, self.display))))?;
        conn.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| self.tag(Error::from(e)))?;
        conn.set_write_timeout(Some(IO_TIMEOUT)).map_err(|e| self.tag(Error::from(e)))?;
        Ok(conn)
    }
}

/// A checkout pool. The lock is held only to pop or push a connection, never
/// during I/O, so concurrent callers (one per worker Ractor) do not serialize.
pub struct Pool {
    connector: Connector,
    idle: Mutex<Vec<Connection>>,
}

impl Pool {
    pub fn new(connector: Connector) -> Self {
        Pool { connector, idle: Mutex::new(Vec::new()) }
    }

    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    /// Runs `f` on a pooled connection. A connection that saw a connection
    /// error is dropped, not returned. When a connection taken from the pool
    /// fails that way (typically: Redis restarted while it sat idle), the
    /// idle connections are discarded and `f` runs once more on a fresh one.
    /// That retry can repeat a command whose reply was lost; every caller's
    /// operation is either idempotent or, for an enqueue, at worst writes
    /// the same envelope (same job id) twice: at-least-once.
    pub fn with<T>(&self, f: impl Fn(&mut Connection) -> Result<T>) -> Result<T> {
        let popped = self.idle.lock().pop();
        let reused = popped.is_some();
        let mut conn = match popped {
            Some(c) => c,
            None => self.connector.connect()?,
        };
        let mut out = f(&mut conn);
        if reused && matches!(&out, Err(e) if e.is_connection()) {
            self.idle.lock().clear();
            conn = self.connector.connect()?;
            out = f(&mut conn);
        }
        if !matches!(&out, Err(e) if e.is_connection()) {
            let mut idle = self.idle.lock();
            if idle.len() < POOL_KEEP {
                idle.push(conn);
            }
        }
        out.map_err(|e| self.connector.tag(e))
    }
}

/// One connection owned by one thread, re-established with capped
/// exponential backoff after a failure.
pub struct Reconnecting {
    connector: Connector,
    conn: Option<Connection>,
    failures: u32,
    next_attempt: Instant,
    /// Whether the last `run` got as far as calling its function (so a
    /// command may have reached Redis even if it then failed).
    sent: bool,
}

/// Reconnect delays: 50 ms doubling up to 2 s.
const RECONNECT_MIN: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(2);

impl Reconnecting {
    pub fn new(connector: Connector) -> Self {
        Reconnecting { connector, conn: None, failures: 0, next_attempt: Instant::now(), sent: false }
    }

    pub fn is_connected(&self) -> bool {
        self.conn.is_some()
    }

    /// How long until the next connection attempt is allowed.
    pub fn backoff_remaining(&self) -> Duration {
        self.next_attempt.saturating_duration_since(Instant::now())
    }

    /// How long a thread whose call just failed waits before its next
    /// one: the reconnect backoff, and at least the shortest reconnect
    /// delay even when the connection survived (the backend answered with
    /// an error), so an error answered at once is not retried in a spin.
    pub fn pause_before_retry(&self) -> Duration {
        self.backoff_remaining().max(RECONNECT_MIN)
    }

    /// True when the last `run` called its function: a failure then may
    /// have happened after Redis executed the command.
    pub fn last_call_sent(&self) -> bool {
        self.sent
    }

    pub fn run<T>(&mut self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.sent = false;
        if self.conn.is_none() {
            if Instant::now() < self.next_attempt {
                return Err(self.connector.tag(Error::Connection("reconnect backoff in progress".into())));
            }
            match self.connector.connect() {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    self.note_failure();
                    return Err(e);
                }
            }
        }
        self.sent = true;
        let out = f(self.conn.as_mut().expect("connected"));
        match &out {
            Err(e) if e.is_connection() => {
                self.conn = None;
                self.note_failure();
            }
            _ => self.failures = 0,
        }
        out.map_err(|e| self.connector.tag(e))
    }

    fn note_failure(&mut self) {
        self.failures = self.failures.saturating_add(1);
        let exp = self.failures.min(10) - 1;
        let delay = (RECONNECT_MIN * (1u32 << exp)).min(RECONNECT_MAX);
        self.next_attempt = Instant::now() + delay;
    }
}
