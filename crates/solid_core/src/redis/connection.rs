//! Redis connections: a small checkout pool for request/response callers
//! (enqueue, failure handling) and a reconnecting connection with backoff for
//! the dispatcher's long-lived threads.
//!
//! Every byte exchanged with the server, the connection handshake included,
//! runs under the [`Timeouts`]: a server that accepts connections but never
//! answers (paused with SIGSTOP, a black-holed route, a wedged proxy) makes a
//! call fail with [`Error::Timeout`] within them, never hang.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{
    Client, Connection, ConnectionInfo, ConnectionLike, FromRedisValue, IntoConnectionInfo, Pipeline, ProtocolVersion,
    Value,
};

use crate::error::{Error, Result};
use crate::interrupt;
use crate::redact::redact;

/// How long to wait for a TCP connect (`connect`), for a request to be
/// written (`write`) and for its reply (`read`). A slower reply is treated as
/// a broken connection: the call fails with [`Error::Timeout`], the
/// connection is dropped, and whether the command ran is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub read: Duration,
    pub write: Duration,
}

impl Default for Timeouts {
    /// Connect: far above a LAN or cross-zone handshake. Read and write:
    /// above any healthy command (the slowest scripts, a large enqueue_many
    /// or a dead node's recovery, take milliseconds; Redis itself answers
    /// BUSY to others after a 5 s script) and far below `recovery_delay`, so
    /// a hung Redis surfaces as an error within seconds.
    fn default() -> Self {
        Timeouts { connect: Duration::from_secs(2), read: Duration::from_secs(5), write: Duration::from_secs(5) }
    }
}

impl Timeouts {
    pub fn validate(&self) -> Result<()> {
        for (name, d) in [("connect", self.connect), ("read", self.read), ("write", self.write)] {
            if d.is_zero() {
                return Err(Error::Invalid(format!("the {name} timeout must be above zero")));
            }
        }
        Ok(())
    }
}

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
    /// Opens the socket only: no credentials and database 0, so the redis
    /// crate sends nothing during its own handshake, which it would run
    /// without any read timeout (a paused server accepts the TCP connection
    /// from its listen backlog and then never answers). [`Connector::connect`]
    /// authenticates and selects the database itself, under the timeouts.
    bare: Client,
    username: Option<String>,
    password: Option<String>,
    db: i64,
    url: String,
    /// The URL as the user wrote it, credentials redacted: the only form
    /// that goes into error messages.
    display: String,
    backend: Backend,
    timeouts: Timeouts,
}

impl Connector {
    pub fn new(url: &str) -> Result<Self> {
        Self::with_timeouts(url, Timeouts::default())
    }

    pub fn with_timeouts(url: &str, timeouts: Timeouts) -> Result<Self> {
        timeouts.validate()?;
        let invalid = |e: redis::RedisError| Error::Invalid(redact(&format!("invalid Redis URL {url:?}: {e}")));
        let info: ConnectionInfo = url.into_connection_info().map_err(invalid)?;
        let bare_info = ConnectionInfo {
            addr: info.addr.clone(),
            redis: redis::RedisConnectionInfo {
                db: 0,
                username: None,
                password: None,
                // Our replies are parsed as RESP2 (HELLO 3 would also be a
                // handshake command sent without a timeout).
                protocol: ProtocolVersion::RESP2,
            },
        };
        let bare = Client::open(bare_info).map_err(invalid)?;
        Ok(Connector {
            bare,
            username: info.redis.username,
            password: info.redis.password,
            db: info.redis.db,
            url: url.to_owned(),
            display: redact(url),
            backend: Backend::Redis,
            timeouts,
        })
    }

    /// The same connector, for SolidEngine reached at `user_url` (what
    /// messages show instead of the converted `redis://` form).
    pub fn for_engine(self, user_url: &str) -> Self {
        Connector { display: redact(user_url), backend: Backend::Engine, ..self }
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

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The same server with `extra` added to the read timeout, for a
    /// connection whose commands wait on the server by design (SolidEngine's
    /// long-polling FETCH): the timeout still bounds the server's silence
    /// beyond that wait.
    pub fn with_extra_read_time(&self, extra: Duration) -> Connector {
        let mut c = self.clone();
        c.timeouts.read += extra;
        c
    }

    pub fn connect(&self) -> Result<Connection> {
        let t = self.timeouts;
        let mut conn = self.bare.get_connection_with_timeout(t.connect).map_err(|e| self.failed(e))?;
        conn.set_read_timeout(Some(t.read)).map_err(|e| self.tag(Error::from(e)))?;
        conn.set_write_timeout(Some(t.write)).map_err(|e| self.tag(Error::from(e)))?;
        if let Some(password) = &self.password {
            self.authenticate(&mut conn, password)?;
        }
        if self.db != 0 {
            redis::cmd("SELECT").arg(self.db).query::<()>(&mut conn).map_err(|e| self.failed(e))?;
        }
        Ok(conn)
    }

    /// AUTH as the redis crate sends it: with the username when the URL
    /// has one, and once more without it for a server older than ACLs
    /// (which refuses the two-argument form).
    fn authenticate(&self, conn: &mut Connection, password: &str) -> Result<()> {
        let auth = |conn: &mut Connection, user: Option<&str>| {
            let mut cmd = redis::cmd("AUTH");
            if let Some(u) = user {
                cmd.arg(u);
            }
            cmd.arg(password).query::<()>(conn)
        };
        let out = match auth(conn, self.username.as_deref()) {
            Err(e) if self.username.is_some() && e.to_string().contains("wrong number of arguments") => {
                auth(conn, None)
            }
            out => out,
        };
        out.map_err(|e| self.failed(e))
    }

    /// A failed connection attempt (connect, AUTH, SELECT) as an error
    /// naming the server: a timeout, or else a connection failure, so a
    /// refused password is reported like an unreachable server.
    fn failed(&self, e: redis::RedisError) -> Error {
        if e.is_timeout() {
            self.timed_out(&e.to_string())
        } else {
            self.tag(Error::Connection(format!("{e} ({})", self.display)))
        }
    }

    /// A timeout in words a reader can act on: which limits were exceeded,
    /// and where (the socket only says "Resource temporarily unavailable").
    fn timed_out(&self, detail: &str) -> Error {
        let t = self.timeouts;
        self.tag(Error::Timeout(format!(
            "no answer within the timeouts (connect {:?}, read {:?}, write {:?}): {detail} ({})",
            t.connect, t.read, t.write, self.display
        )))
    }

    /// Names the limits and the server in a command's timeout.
    fn explain<T>(&self, out: Result<T>) -> Result<T> {
        match out {
            Err(Error::Timeout(m)) => Err(self.timed_out(&m)),
            other => other.map_err(|e| self.tag(e)),
        }
    }
}

/// Runs `f` with asynchronous signals blocked on this thread. With a read
/// timeout on the socket, Linux does not restart a `recv` that a signal
/// handler interrupted (EINTR), and the redis crate then treats the reply
/// as lost: any signal meant for someone else (the Ruby VM's timer signal,
/// SIGVTALRM, fires whenever threads contend for the GVL) failed a call with
/// "Interrupted system call". Blocked here, a signal waits until the call
/// returns, within its timeouts, or goes to another thread; Ruby itself
/// interrupts a blocking call through its unblocking function, not a
/// signal. Fault signals (SIGSEGV...) stay unblocked.
pub(crate) fn signals_deferred<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(libc::sigset_t);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: restores the mask saved below, on this thread.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
        }
    }
    // SAFETY: plain libc calls on stack-allocated signal sets.
    let _restore = unsafe {
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut blocked);
        for fault in
            [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT, libc::SIGTRAP, libc::SIGSYS]
        {
            libc::sigdelset(&mut blocked, fault);
        }
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut previous);
        Restore(previous)
    };
    f()
}

/// Runs `pipe` as `Pipeline::query` does, except that the first reply that
/// does not arrive ends it. The redis crate goes on reading every remaining
/// reply after a read error, each with a full read timeout, so a silent
/// server held a pipeline of N commands (a telemetry flush, a MULTI/EXEC)
/// for N read timeouts. The connection is dropped afterwards like after any
/// connection error (`Pool::with`, `Reconnecting::run`).
pub fn query_pipeline<T: FromRedisValue>(pipe: &Pipeline, conn: &mut Connection) -> redis::RedisResult<T> {
    pipe.query(&mut FailFast(conn))
}

/// A connection whose pipelined reads stop at the first I/O error.
struct FailFast<'a>(&'a mut Connection);

impl ConnectionLike for FailFast<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<Value> {
        self.0.req_packed_command(cmd)
    }

    /// As the redis crate's: replies before `offset` are checked for errors
    /// and dropped, `count` replies after them returned; but an I/O error
    /// (timeout, reset) returns at once, since no later reply can arrive.
    fn req_packed_commands(&mut self, cmd: &[u8], offset: usize, count: usize) -> redis::RedisResult<Vec<Value>> {
        self.0.send_packed_command(cmd)?;
        let mut replies = Vec::with_capacity(count);
        let mut first_error = None;
        for index in 0..offset + count {
            match self.0.recv_response() {
                Ok(Value::ServerError(e)) if index < offset => {
                    first_error.get_or_insert(e.into());
                }
                Ok(reply) if index >= offset => replies.push(reply),
                Ok(_) => {}
                Err(e) if e.is_io_error() => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(replies), Err)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.0.check_connection()
    }

    fn is_open(&self) -> bool {
        self.0.is_open()
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
    /// idle connections are discarded and `f` runs once more on a fresh one
    /// (not after a timeout, so a silent server fails a call within one
    /// read timeout, and not when Ruby interrupted the call).
    /// That retry can repeat a command whose reply was lost; every caller's
    /// operation is either idempotent or, for an enqueue, at worst writes
    /// the same envelope (same job id) twice: at-least-once.
    pub fn with<T>(&self, f: impl Fn(&mut Connection) -> Result<T>) -> Result<T> {
        signals_deferred(|| self.run(f))
    }

    fn run<T>(&self, f: impl Fn(&mut Connection) -> Result<T>) -> Result<T> {
        let popped = self.idle.lock().pop();
        let reused = popped.is_some();
        let mut conn = match popped {
            Some(c) => c,
            None => self.connector.connect()?,
        };
        let mut out = self.connector.explain(f(&mut conn));
        // Not after a timeout: the server is there but silent, and a second
        // attempt would only double how long the caller waits for the error.
        // Nor when Ruby interrupted the call (a signal cut the wait short,
        // and the process wants its thread back).
        let retry = |e: &Error| e.is_connection() && !e.is_timeout() && !interrupt::current_is_set();
        if reused && matches!(&out, Err(e) if retry(e)) {
            self.idle.lock().clear();
            conn = self.connector.connect()?;
            out = self.connector.explain(f(&mut conn));
        }
        if !matches!(&out, Err(e) if e.is_connection()) {
            let mut idle = self.idle.lock();
            if idle.len() < POOL_KEEP {
                idle.push(conn);
            }
        }
        out
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
        signals_deferred(|| self.attempt(f))
    }

    fn attempt<T>(&mut self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
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
        let out = self.connector.explain(f(self.conn.as_mut().expect("connected")));
        match &out {
            Err(e) if e.is_connection() => {
                self.conn = None;
                self.note_failure();
            }
            _ => self.failures = 0,
        }
        out
    }

    fn note_failure(&mut self) {
        self.failures = self.failures.saturating_add(1);
        let exp = self.failures.min(10) - 1;
        let delay = (RECONNECT_MIN * (1u32 << exp)).min(RECONNECT_MAX);
        self.next_attempt = Instant::now() + delay;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn short() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(1),
            read: Duration::from_millis(300),
            write: Duration::from_millis(300),
        }
    }

    /// A server that accepts every connection and answers the PINGs of the
    /// first `answered` requests of the first one, then nothing ever again
    /// (as a paused Redis: the kernel still accepts from the listen backlog).
    /// Returns its port and the number of connections it accepted.
    fn going_silent(answered: usize) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            for (i, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                if i == 0 {
                    let mut buf = [0u8; 4096];
                    for _ in 0..answered {
                        let n = stream.read(&mut buf).unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        // One PONG per PING of the chunk (a pipeline comes in one).
                        let pings = buf[..n].windows(4).filter(|w| w == b"PING").count();
                        let _ = stream.write_all(&b"+PONG\r\n".repeat(pings));
                    }
                }
                kept.push(stream);
            }
        });
        (port, accepted)
    }

    #[test]
    fn the_handshake_runs_under_the_timeouts() {
        let (port, _) = going_silent(0);
        let connector = Connector::with_timeouts(&format!("redis://:secret@127.0.0.1:{port}/3"), short()).unwrap();
        let started = Instant::now();
        let e = connector.connect().err().expect("AUTH is never answered");
        assert!(e.is_timeout(), "{e}");
        assert!(e.to_string().contains("read 300ms"), "names the limit: {e}");
        assert!(started.elapsed() < Duration::from_secs(3), "bounded by the read timeout");
    }

    #[test]
    fn a_timeout_fails_the_call_once_without_a_second_connection() {
        let (port, accepted) = going_silent(1);
        let pool = Pool::new(Connector::with_timeouts(&format!("redis://127.0.0.1:{port}"), short()).unwrap());
        let ping = |c: &mut Connection| redis::cmd("PING").query::<String>(c).map_err(Error::from);
        assert_eq!(pool.with(ping).unwrap(), "PONG");
        let e = pool.with(ping).unwrap_err();
        assert!(e.is_timeout() && e.is_connection(), "{e}");
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "a silent server is not asked again on a new connection");
    }

    #[test]
    fn a_pipeline_gives_up_at_the_first_missing_reply() {
        let (port, _) = going_silent(1);
        let mut conn =
            Connector::with_timeouts(&format!("redis://127.0.0.1:{port}"), short()).unwrap().connect().unwrap();
        let mut pipe = redis::pipe();
        for _ in 0..3 {
            pipe.cmd("PING");
        }
        let pongs: Vec<String> = query_pipeline(&pipe, &mut conn).unwrap();
        assert_eq!(pongs, ["PONG"; 3], "answered: the replies, as Pipeline::query gives them");
        for _ in 0..7 {
            pipe.cmd("PING").ignore();
        }
        let started = Instant::now();
        let e = Error::from(query_pipeline::<()>(&pipe, &mut conn).unwrap_err());
        assert!(e.is_timeout(), "{e}");
        assert!(started.elapsed() < Duration::from_millis(900), "one read timeout for 10 commands, not 10");
    }

    /// Delivers SIGUSR2 (a handler installed, as the Ruby VM installs its
    /// timer signal's) to the thread blocked in a call, every few
    /// milliseconds: the call still gets its reply.
    #[test]
    fn a_signal_for_someone_else_does_not_fail_a_call() {
        extern "C" fn ignore(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, installed with SA_RESTART as
        // Ruby installs its own.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut());
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 512];
            while stream.read(&mut buf).unwrap_or(0) > 0 {
                std::thread::sleep(Duration::from_millis(150));
                let _ = stream.write_all(b"+PONG\r\n");
            }
        });
        let caller = unsafe { libc::pthread_self() };
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let signaller = {
            let done = done.clone();
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    // SAFETY: the caller thread outlives this loop (joined below).
                    unsafe { libc::pthread_kill(caller, libc::SIGUSR2) };
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        let pool =
            Pool::new(Connector::with_timeouts(&format!("redis://127.0.0.1:{port}"), Timeouts::default()).unwrap());
        let out = pool.with(|c| redis::cmd("PING").query::<String>(c).map_err(Error::from));
        done.store(true, Ordering::SeqCst);
        signaller.join().unwrap();
        assert_eq!(out.unwrap(), "PONG");
    }

    #[test]
    fn timeouts_must_be_above_zero() {
        let t = Timeouts { read: Duration::ZERO, ..Timeouts::default() };
        assert!(matches!(Connector::with_timeouts("redis://127.0.0.1:1", t), Err(Error::Invalid(_))));
    }
}
