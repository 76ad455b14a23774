//! Server tests over real sockets: a TCP listener on port 0 and a Unix
//! socket in a temporary directory, talked to with raw RESP and with the
//! `redis` crate our client uses.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::*;
use crate::engine::JobId;
use crate::resp::{self, Decoder, Frame, Mode};
use crate::testutil::TempDir;

struct TestServer {
    shutdown: ShutdownHandle,
    thread: Option<JoinHandle<Result<()>>>,
    tcp: SocketAddr,
    unix: PathBuf,
    /// The running server's state, to wait on what it is doing. Weak:
    /// `run` waits for the other handles to go before it returns.
    shared: std::sync::Weak<Shared>,
    _dir: TempDir,
}

impl TestServer {
    fn start(config: Config) -> TestServer {
        TestServer::start_with_hook(config, None)
    }

    fn start_with_hook(config: Config, hook: Option<CompactionHook>) -> TestServer {
        let dir = TempDir::new("server");
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let unix = dir.path().join("engine.sock");
        let listeners = vec![Listener::Tcp(tcp), Listener::bind_unix(&unix).unwrap()];
        let server = Server::open(config).unwrap();
        let shared = Arc::downgrade(&server.shared);
        if let Some(hook) = hook {
            server.set_compaction_hook(hook);
        }
        let shutdown = ShutdownHandle::new();
        let handle = shutdown.clone();
        let thread = thread::spawn(move || server.run(listeners, handle));
        TestServer { shutdown, thread: Some(thread), tcp: addr, unix, shared, _dir: dir }
    }

    /// Polls `probe` of the server's state until it gives `want`, for at
    /// most 10 s; fails with what it last gave.
    fn wait_for<T: PartialEq + std::fmt::Debug>(&self, what: &str, want: T, probe: impl Fn(&Shared) -> T) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let seen = probe(&self.shared.upgrade().expect("the server is running"));
            if seen == want {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: still {seen:?} after 10 s, waited for {want:?}");
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits until `n` FETCHes are blocked.
    fn wait_blocked(&self, n: usize) {
        self.wait_for("blocked FETCHes", n, |shared| shared.notifier.waiting());
    }

    fn memory() -> TestServer {
        TestServer::start(Config::default())
    }

    fn tcp(&self) -> Client {
        Client::new(Box::new(TcpStream::connect(self.tcp).unwrap()))
    }

    fn unix(&self) -> Client {
        Client::new(Box::new(UnixStream::connect(&self.unix).unwrap()))
    }

    fn stop(mut self) -> Result<()> {
        self.shutdown.trigger();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.trigger();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

struct Client {
    stream: Box<dyn Conn>,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Client {
    fn new(stream: Box<dyn Conn>) -> Client {
        Client { stream, decoder: Decoder::new(Mode::Reply), buf: Vec::new() }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next reply, or None at end of stream.
    fn read(&mut self) -> Option<Frame> {
        loop {
            let (used, frame) = self.decoder.decode(&self.buf).unwrap();
            self.buf.drain(..used);
            if frame.is_some() {
                return frame;
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn call(&mut self, args: &[&str]) -> Frame {
        let mut out = Vec::new();
        resp::write_command(&mut out, args);
        self.send_raw(&out);
        self.read().expect("a reply")
    }
}

fn simple(s: &str) -> Frame {
    Frame::Simple(s.as_bytes().to_vec())
}

fn error_code(frame: &Frame) -> String {
    match frame {
        Frame::Error(e) => String::from_utf8_lossy(e).split(' ').next().unwrap().to_string(),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn items(frame: Frame) -> Vec<Frame> {
    match frame {
        Frame::Array(items) => items,
        other => panic!("expected an array, got {other:?}"),
    }
}

fn int(frame: &Frame) -> i64 {
    match frame {
        Frame::Integer(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn text(frame: &Frame) -> String {
    match frame {
        Frame::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

fn new_id() -> String {
    JobId::random().to_string()
}

#[test]
fn inline_ping_and_unknown_command_keep_the_connection() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    c.send_raw(b"PING\r\n");
    assert_eq!(c.read(), Some(simple("PONG")));
    assert_eq!(error_code(&c.call(&["FLUSHALL"])), "UNKNOWN");
    assert_eq!(error_code(&c.call(&["ACK", "x"])), "ERR");
    assert_eq!(c.call(&["ping", "hello"]), Frame::Bulk(b"hello".to_vec()));
}

#[test]
fn job_lifecycle_over_the_unix_socket() {
    let server = TestServer::memory();
    let mut c = server.unix();
    let (a, b) = (new_id(), new_id());
    assert_eq!(c.call(&["PUSH", "1", &a, "alpha"]), Frame::Integer(1));
    assert_eq!(c.call(&["PUSH", "1", &a, "again"]), Frame::Integer(0), "dedup");
    assert_eq!(error_code(&c.call(&["PUSH", "1", "not-a-uuid", "x"])), "ERR");
    let job = items(c.call(&["GET", &a]));
    assert_eq!((text(&job[0]), int(&job[1]), text(&job[2]), int(&job[3])), (a.clone(), 1, "ready".into(), 0));
    assert_eq!((text(&job[4]), int(&job[5])), ("alpha".into(), -1));
    assert_eq!(c.call(&["GET", &new_id()]), Frame::Null);

    let r = items(items(c.call(&["FETCH", "5", "0", "0", "1"])).remove(0));
    assert_eq!((text(&r[0]), int(&r[1]), int(&r[3]), text(&r[4])), (a.clone(), 1, 1, "alpha".into()));
    let fence = int(&r[2]).to_string();
    assert_eq!(error_code(&c.call(&["CANCEL", &a])), "BUSY");
    assert_eq!(c.call(&["EXTEND", &a, &fence, "60000"]), simple("OK"));
    assert_eq!(error_code(&c.call(&["ACK", &a, "1"])), "STALE");
    assert_eq!(c.call(&["RETRY", &a, &fence, "0"]), simple("OK"));
    let r = items(items(c.call(&["FETCH", "5", "0", "0", "1"])).remove(0));
    assert_eq!(int(&r[3]), 2, "attempts");
    let fence2 = int(&r[2]).to_string();
    assert_eq!(error_code(&c.call(&["ACK", &a, &fence])), "STALE");
    assert_eq!(c.call(&["FAIL", &a, &fence2, "it broke"]), simple("OK"));
    let dead = items(items(c.call(&["DEAD"])).remove(0));
    assert_eq!((text(&dead[0]), int(&dead[2]), text(&dead[3])), (a.clone(), 2, "it broke".into()));
    assert_eq!(error_code(&c.call(&["ACK", &new_id(), "1"])), "NOTFOUND");

    assert_eq!(c.call(&["PUSHMANY", "2", "0", &b, "b", &new_id(), "c"]), Frame::Integer(2));
    assert_eq!(c.call(&["CANCEL", &b]), Frame::Integer(1));
    assert_eq!(c.call(&["CANCEL", &b]), Frame::Integer(0));
    let got = items(c.call(&["FETCH", "10", "0", "0", "2"]));
    assert_eq!(got.len(), 1, "the cancelled job is never delivered");
    let r = items(got.into_iter().next().unwrap());
    let pair = [text(&r[0]), int(&r[2]).to_string()];
    let acks = items(c.call(&["ACKMANY", &pair[0], &pair[1], &b, "1"]));
    assert_eq!(acks, vec![Frame::Integer(1), Frame::Integer(0)]);

    let stats = text(&c.call(&["STATS"]));
    for line in [
        "completed:1",
        "dead:1",
        "cancelled:1",
        "pushed_total:3",
        "acked_total:1",
        "retried_total:1",
        "failed_total:1",
        "connections:1",
        "durability:memory",
    ] {
        assert!(stats.lines().any(|l| l == line), "{line} missing in\n{stats}");
    }
    assert!(stats.contains("uptime_s:") && stats.contains("expired_leases_total:0"));
}

#[test]
fn redis_crate_connects_and_talks() {
    let server = TestServer::memory();
    for url in [format!("redis://{}/", server.tcp), format!("redis+unix://{}", server.unix.display())] {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut con = client.get_connection().unwrap();
        let pong: String = redis::cmd("PING").query(&mut con).unwrap();
        assert_eq!(pong, "PONG");
        let id = new_id();
        let created: i64 = redis::cmd("PUSH").arg(3).arg(&id).arg(b"payload").query(&mut con).unwrap();
        assert_eq!(created, 1);
        let fetched: Vec<(String, u32, u64, u32, Vec<u8>)> =
            redis::cmd("FETCH").arg(10).arg(0).arg(0).arg(3).query(&mut con).unwrap();
        assert_eq!(fetched.len(), 1);
        assert_eq!((&fetched[0].0, fetched[0].1, fetched[0].3, &fetched[0].4[..]), (&id, 3, 1, &b"payload"[..]));
        let ok: String = redis::cmd("ACK").arg(&id).arg(fetched[0].2).query(&mut con).unwrap();
        assert_eq!(ok, "OK");
        let err = redis::cmd("ACK").arg(&id).arg(fetched[0].2).query::<String>(&mut con).unwrap_err();
        assert_eq!(err.code(), Some("STALE"));
    }
    // SELECT 0 in the URL is accepted too.
    let client = redis::Client::open(format!("redis://{}/0", server.tcp).as_str()).unwrap();
    let mut con = client.get_connection().unwrap();
    let _: String = redis::cmd("PING").query(&mut con).unwrap();
}

#[test]
fn password_is_required_when_configured() {
    let server = TestServer::start(Config { password: Some("s3cret".into()), ..Config::default() });
    let mut c = server.tcp();
    assert_eq!(c.call(&["PING"]), simple("PONG"));
    assert_eq!(c.call(&["CLIENT", "SETINFO", "LIB-NAME", "x"]), simple("OK"));
    assert_eq!(error_code(&c.call(&["STATS"])), "NOAUTH");
    assert_eq!(error_code(&c.call(&["GET", &new_id()])), "NOAUTH");
    assert_eq!(error_code(&c.call(&["AUTH", "wrong"])), "WRONGPASS");
    assert_eq!(c.read(), None, "a failed AUTH closes the connection");
    let mut c = server.tcp();
    assert_eq!(c.call(&["AUTH", "s3cret"]), simple("OK"));
    assert!(matches!(c.call(&["STATS"]), Frame::Bulk(_)));

    let url = format!("redis://:s3cret@{}/", server.tcp);
    let mut con = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    let _: String = redis::cmd("STATS").query(&mut con).unwrap();
    let bad = format!("redis://:nope@{}/", server.tcp);
    assert!(redis::Client::open(bad.as_str()).unwrap().get_connection().is_err());
}

/// The idle timeout closes an authenticated connection that sends nothing,
/// but never cuts a blocked FETCH (nothing is read while it waits).
#[test]
fn idle_timeout_closes_silent_connections_but_not_blocked_fetches() {
    let server = TestServer::start(Config { idle_timeout_ms: 300, ..Config::default() });
    let mut c = server.tcp();
    assert_eq!(c.call(&["PING"]), simple("PONG"));
    assert_eq!(
        c.call(&["FETCH", "1", "0", "600", "1"]),
        Frame::Array(vec![]),
        "a 600 ms FETCH outlives a 300 ms idle timeout"
    );
    let started = Instant::now();
    assert_eq!(error_code(&c.read().unwrap()), "ERR");
    assert_eq!(c.read(), None);
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
}

/// Connections serving an AUTH failure delay keep their handshake slots:
/// a new connection cannot evict them (which would let a guesser skip the
/// delay), so it is refused while they all wait; an authenticated
/// connection is unaffected.
#[test]
fn connections_serving_an_auth_delay_are_not_evicted() {
    let server = TestServer::start(Config {
        password: Some("pw".into()),
        max_unauthenticated: 2,
        auth_failure_delay_ms: 800,
        ..Config::default()
    });
    let mut worker = server.tcp();
    assert_eq!(worker.call(&["AUTH", "pw"]), simple("OK"));
    let mut guessers: Vec<Client> = (0..2).map(|_| server.tcp()).collect();
    for g in &mut guessers {
        g.send_raw(b"AUTH guess\r\n");
    }
    // Both guessers serve their delay, pinned in the handshake class.
    let pinned =
        |shared: &Shared| shared.tracker.state.lock().pending.values().filter(|&&evictable| !evictable).count();
    server.wait_for("pinned handshake slots", 2, pinned);
    let mut refused = server.tcp();
    assert_eq!(error_code(&refused.read().unwrap()), "MAXCONN");
    assert_eq!(worker.call(&["PING"]), simple("PONG"));
    for g in &mut guessers {
        assert_eq!(error_code(&g.read().unwrap()), "WRONGPASS");
        assert_eq!(g.read(), None);
    }
    // The delays over, the slots are free again.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = server.tcp();
        c.send_raw(b"AUTH pw\r\n");
        match c.read() {
            Some(f) if f == simple("OK") => break,
            _ if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            other => panic!("slots never freed: {other:?}"),
        }
    }
}

/// docs/protocol.md: a bare CLIENT is an arity error, and top-level input
/// that does not start with `*` is an inline command even when it looks
/// like another RESP type; neither closes the connection.
#[test]
fn bare_client_and_top_level_non_arrays_are_as_documented() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    assert_eq!(error_code(&c.call(&["CLIENT"])), "ERR");
    assert_eq!(c.call(&["CLIENT", "SETNAME", "x"]), simple("OK"));
    c.send_raw(b"$4\r\nPING\r\n");
    assert_eq!(c.read().unwrap(), Frame::Error(b"UNKNOWN unknown command $4".to_vec()));
    assert_eq!(c.read().unwrap(), simple("PONG"), "the bulk's content ran as an inline PING");
    c.send_raw(b":1\r\n+PING\r\n");
    assert_eq!(error_code(&c.read().unwrap()), "UNKNOWN");
    assert_eq!(error_code(&c.read().unwrap()), "UNKNOWN");
    assert_eq!(c.call(&["PING"]), simple("PONG"));
}

#[test]
fn connections_over_the_limit_get_maxconn() {
    let server = TestServer::start(Config { max_connections: 2, ..Config::default() });
    let mut a = server.tcp();
    let mut b = server.unix();
    assert_eq!(a.call(&["PING"]), simple("PONG"));
    assert_eq!(b.call(&["PING"]), simple("PONG"));
    let mut c = server.tcp();
    assert_eq!(error_code(&c.read().unwrap()), "MAXCONN");
    assert_eq!(c.read(), None, "closed after the error");
    assert_eq!(a.call(&["PING"]), simple("PONG"), "existing connections unaffected");
    drop(b);
    // The slot frees once the server notices the close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut d = server.tcp();
        d.send_raw(b"PING\r\n");
        match d.read() {
            Some(f) if f == simple("PONG") => break,
            _ if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            other => panic!("slot never freed: {other:?}"),
        }
    }
}

#[test]
fn a_panic_closes_only_its_connection() {
    let server = TestServer::memory();
    let mut a = server.tcp();
    let mut b = server.tcp();
    assert_eq!(b.call(&["PUSH", "1", &new_id(), "x"]), Frame::Integer(1));
    a.send_raw(b"*2\r\n$5\r\nDEBUG\r\n$5\r\nPANIC\r\n");
    assert_eq!(a.read(), None, "panicking connection is closed");
    assert_eq!(b.call(&["PING"]), simple("PONG"));
    assert_eq!(items(b.call(&["FETCH", "1", "0", "0", "1"])).len(), 1, "engine still usable");
    let mut c = server.unix();
    assert_eq!(c.call(&["PING"]), simple("PONG"));
    let stats = text(&c.call(&["STATS"]));
    assert!(stats.contains("connections:2"), "{stats}");
}

#[test]
fn a_bad_frame_closes_only_that_connection() {
    let server = TestServer::memory();
    let mut good = server.tcp();
    for bad in [&b"*1\r\n:5\r\n"[..], b"*2\r\n$x\r\n", b"*1\r\n$3\r\nabcd\r\n"] {
        let mut c = server.tcp();
        c.send_raw(b"PING\r\n");
        c.send_raw(bad);
        assert_eq!(c.read(), Some(simple("PONG")), "replies before the bad frame are sent");
        assert_eq!(error_code(&c.read().unwrap()), "PROTO");
        assert_eq!(c.read(), None);
    }
    assert_eq!(good.call(&["PING"]), simple("PONG"));
}

#[test]
fn blocking_fetch_is_woken_by_push() {
    let server = TestServer::memory();
    let mut waiter = server.unix();
    let started = Instant::now();
    let handle = thread::spawn(move || {
        let got = items(waiter.call(&["FETCH", "1", "0", "10000", "9"]));
        (got, started.elapsed())
    });
    server.wait_blocked(1);
    let id = new_id();
    assert_eq!(server.tcp().call(&["PUSH", "9", &id, "wake"]), Frame::Integer(1));
    let (got, took) = handle.join().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(text(&items(got.into_iter().next().unwrap())[0]), id);
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

/// Issue 18 item 13: a job wakes a waiter of its channel (not an older
/// waiter of another channel), PUSHMANY wakes one waiter per job, and a
/// waiter nothing was pushed for stays blocked.
#[test]
fn each_job_wakes_one_waiter_of_its_channel() {
    let server = TestServer::memory();
    // Each waiter is blocked before the next one comes: they queue in order.
    let mut blocked = 0;
    let mut wait = |channels: &'static [&'static str], block: &'static str| {
        let mut c = server.unix();
        let started = Instant::now();
        let handle = thread::spawn(move || {
            let mut args = vec!["FETCH", "1", "0", block];
            args.extend_from_slice(channels);
            (items(c.call(&args)).len(), started.elapsed())
        });
        blocked += 1;
        server.wait_blocked(blocked);
        handle
    };
    let other = wait(&["2"], "1500");
    let ones: Vec<_> = (0..3).map(|_| wait(&["1"], "1500")).collect();
    let multi = wait(&["3", "4"], "5000");
    let mut c = server.tcp();
    let (a, b) = (new_id(), new_id());
    assert_eq!(int(&c.call(&["PUSHMANY", "1", "0", &a, "x", &b, "y"])), 2);
    assert_eq!(int(&c.call(&["PUSH", "4", &new_id(), "z"])), 1);
    let (got, took) = multi.join().unwrap();
    assert_eq!(got, 1);
    assert!(took < Duration::from_secs(2), "channel 4 waiter took {took:?}");
    let results: Vec<(usize, Duration)> = ones.into_iter().map(|h| h.join().unwrap()).collect();
    let served: Vec<_> = results.iter().filter(|(n, _)| *n == 1).collect();
    assert_eq!(served.len(), 2, "two jobs, two waiters: {results:?}");
    assert!(served.iter().all(|(_, took)| *took < Duration::from_secs(1)), "{results:?}");
    assert_eq!(other.join().unwrap().0, 0, "the channel 2 waiter got nothing");
}

#[test]
fn blocking_fetch_times_out_empty_and_wakes_on_lease_expiry() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    let started = Instant::now();
    assert_eq!(c.call(&["FETCH", "1", "0", "150", "1"]), Frame::Array(vec![]));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(140) && took < Duration::from_secs(2), "{took:?}");

    let id = new_id();
    c.call(&["PUSH", "4", &id, "x"]);
    assert_eq!(items(c.call(&["FETCH", "1", "200", "0", "4"])).len(), 1);
    let started = Instant::now();
    let again = items(c.call(&["FETCH", "1", "0", "5000", "4"]));
    assert_eq!(again.len(), 1, "expired lease delivers the job again");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(text(&c.call(&["STATS"])).contains("expired_leases_total:1"));
}

#[test]
fn graceful_shutdown_ends_blocked_fetches_and_removes_the_socket() {
    let server = TestServer::memory();
    let mut waiter = server.unix();
    assert_eq!(waiter.call(&["PING"]), simple("PONG"));
    let handle = thread::spawn(move || {
        let started = Instant::now();
        let reply = waiter.call(&["FETCH", "1", "0", "30000", "1"]);
        let after = waiter.read();
        (reply, after, started.elapsed())
    });
    let idle = server.tcp();
    server.wait_blocked(1);
    server.wait_for("connections", 2, |shared| shared.tracker.count());
    let socket = server.unix.clone();
    assert!(socket.exists());
    let started = Instant::now();
    server.stop().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
    let (reply, after, took) = handle.join().unwrap();
    assert_eq!(reply, Frame::Array(vec![]), "blocked FETCH answered empty");
    assert_eq!(after, None, "then closed");
    assert!(took < Duration::from_secs(5));
    assert!(!socket.exists(), "socket file removed");
    drop(idle);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    let mut out = Vec::new();
    let ids: Vec<String> = (0..50).map(|_| new_id()).collect();
    for id in &ids {
        resp::write_command(&mut out, &["PUSH", "1", id, "x"]);
    }
    resp::write_command(&mut out, &["FETCH", "100", "0", "0", "1"]);
    c.send_raw(&out);
    for _ in &ids {
        assert_eq!(c.read(), Some(Frame::Integer(1)));
    }
    let got: Vec<String> = items(c.read().unwrap()).into_iter().map(|r| text(&items(r)[0])).collect();
    assert_eq!(got, ids, "FIFO within a channel");
}

#[test]
fn strict_server_recovers_after_restart() {
    let data = TempDir::new("server-strict");
    let config = Config {
        durability: crate::storage::Durability::Strict,
        data_dir: Some(data.path().to_path_buf()),
        ..Config::default()
    };
    let id = new_id();
    let fence;
    {
        let server = TestServer::start(config.clone());
        let mut c = server.unix();
        assert_eq!(c.call(&["PUSH", "1", &id, "durable"]), Frame::Integer(1));
        fence = int(&items(items(c.call(&["FETCH", "1", "0", "0", "1"])).remove(0))[2]);
        assert!(text(&c.call(&["STATS"])).contains("durability:strict"));
        server.stop().unwrap();
    }
    let server = TestServer::start(config);
    let mut c = server.tcp();
    let job = items(c.call(&["GET", &id]));
    assert_eq!((text(&job[2]), int(&job[3])), ("ready".into(), 1), "reservation recovered as ready");
    let r = items(items(c.call(&["FETCH", "1", "0", "0", "1"])).remove(0));
    assert!(int(&r[2]) > fence, "fences never repeat across restarts");
    assert_eq!(int(&r[3]), 2);
}

/// Two starts that recover the same log (the fences handed out in between
/// were never logged, as after a crash in balanced mode's unsynced window)
/// must not hand out the same fences.
#[test]
fn restarts_from_the_same_log_hand_out_different_fences() {
    let data = TempDir::new("server-fences");
    let config = Config {
        durability: crate::storage::Durability::Strict,
        data_dir: Some(data.path().to_path_buf()),
        ..Config::default()
    };
    let id = new_id();
    {
        let server = TestServer::start(config.clone());
        let mut c = server.unix();
        assert_eq!(c.call(&["PUSH", "1", &id, "x"]), Frame::Integer(1));
        // A logged reservation: recovery starts from its fence.
        assert_eq!(items(c.call(&["FETCH", "1", "0", "0", "1"])).len(), 1);
        server.stop().unwrap();
    }
    let snapshot = TempDir::new("server-fences-copy");
    let copy = |from: &std::path::Path, to: &std::path::Path| {
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() && entry.file_name() != "LOCK" {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    };
    copy(data.path(), snapshot.path());
    let first_fence = |dir: &std::path::Path| {
        let server = TestServer::start(Config { data_dir: Some(dir.to_path_buf()), ..config.clone() });
        let r = items(items(server.unix().call(&["FETCH", "1", "0", "0", "1"])).remove(0));
        server.stop().unwrap();
        int(&r[2])
    };
    let a = first_fence(data.path());
    // Wall time: the second start's clock floor (now_ms * 1024) is a later millisecond's.
    thread::sleep(std::time::Duration::from_millis(5));
    let b = first_fence(snapshot.path());
    assert!(b > a, "the second start from the same log reused fences: {a} then {b}");
}

#[test]
fn shutdown_does_not_hang_when_the_socket_file_was_removed() {
    let server = TestServer::memory();
    let mut c = server.unix();
    assert_eq!(c.call(&["PING"]), simple("PONG"));
    std::fs::remove_file(&server.unix).unwrap();
    let started = Instant::now();
    server.stop().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown took {:?}", started.elapsed());
}

#[test]
fn housekeeping_compacts_a_log_much_larger_than_the_live_state() {
    let data = TempDir::new("server-compact");
    let config = Config {
        durability: crate::storage::Durability::Balanced,
        data_dir: Some(data.path().to_path_buf()),
        compact_threshold_bytes: 16 << 10,
        completed_retention_ms: 0,
        ..Config::default()
    };
    let server = TestServer::start(config.clone());
    let mut c = server.unix();
    let keep = new_id();
    c.call(&["PUSH", "2", &keep, "survivor"]);
    for _ in 0..300 {
        let id = new_id();
        c.call(&["PUSH", "1", &id, &"p".repeat(100)]);
        let r = items(items(c.call(&["FETCH", "1", "0", "0", "1"])).remove(0));
        assert_eq!(c.call(&["ACK", &id, &int(&r[2]).to_string()]), simple("OK"));
    }
    let log_size = || -> u64 {
        std::fs::read_dir(data.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !data.path().join("snapshot").exists() || log_size() > 16 << 10 {
        assert!(Instant::now() < deadline, "no compaction; log is {} bytes", log_size());
        thread::sleep(Duration::from_millis(20));
    }
    server.stop().unwrap();
    let server = TestServer::start(config);
    let job = items(server.tcp().call(&["GET", &keep]));
    assert_eq!(text(&job[4]), "survivor");
}

fn stat(c: &mut Client, key: &str) -> String {
    let body = text(&c.call(&["STATS"]));
    let prefix = format!("{key}:");
    body.lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_string)).unwrap_or_else(|| panic!("{body}"))
}

/// Issue 18 item 14: a compaction must not stop the engine while it builds
/// and writes its snapshot. The first compaction is parked in a hook at
/// each of its steps (building the snapshot's image of the state, writing
/// it, written, renamed); at each, a PUSH, FETCH, ACK, PUSH issued then
/// must all be answered before the compaction is let go. (On the old code
/// the image was built under the engine lock, so they waited behind it:
/// the 20 s bound only turns that deadlock into a failure.) The jobs
/// pushed during the compaction survive a restart.
#[test]
fn operations_are_served_while_a_compaction_builds_its_snapshot() {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;
    use CompactionStep::*;
    let data = TempDir::new("server-compact-overlap");
    let config = Config {
        durability: crate::storage::Durability::Balanced,
        data_dir: Some(data.path().to_path_buf()),
        compact_threshold_bytes: 16 << 10,
        completed_retention_ms: 0,
        ..Config::default()
    };
    let (entered_tx, entered_rx) = mpsc::channel::<CompactionStep>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (entered_tx, go_rx) = (Mutex::new(entered_tx), Mutex::new(go_rx));
    let first_done = AtomicBool::new(false);
    let hook: CompactionHook = Arc::new(move |step| {
        if !first_done.load(Ordering::Acquire) {
            let _ = entered_tx.lock().send(step);
            let _ = go_rx.lock().recv_timeout(Duration::from_secs(60));
            first_done.store(step == SnapshotRenamed, Ordering::Release);
        }
    });
    let server = TestServer::start_with_hook(config.clone(), Some(hook));
    let mut c = server.unix();
    let keep = new_id();
    c.call(&["PUSH", "2", &keep, "survivor"]);
    for _ in 0..300 {
        let id = new_id();
        c.call(&["PUSH", "1", &id, &"p".repeat(100)]);
        let r = items(items(c.call(&["FETCH", "1", "0", "0", "1"])).remove(0));
        assert_eq!(c.call(&["ACK", &id, &int(&r[2]).to_string()]), simple("OK"));
    }

    let mut pushed_during = Vec::new();
    for expected in [BuildingImage, WritingSnapshot, SnapshotWritten, SnapshotRenamed] {
        let step = entered_rx.recv_timeout(Duration::from_secs(10)).expect("the compaction reached its next step");
        assert_eq!(step, expected);
        let (done_tx, done_rx) = mpsc::channel();
        let mut during = server.unix();
        let later = new_id();
        pushed_during.push(later.clone());
        let op = thread::spawn(move || {
            let id = new_id();
            during.call(&["PUSH", "1", &id, "during"]);
            let r = items(items(during.call(&["FETCH", "1", "0", "0", "1"])).remove(0));
            let acked = during.call(&["ACK", &id, &int(&r[2]).to_string()]);
            let pushed = during.call(&["PUSH", "3", &later, "pushed during compaction"]);
            let compacting = stat(&mut during, "compacting");
            let _ = done_tx.send((acked, pushed, compacting));
        });
        let served = done_rx.recv_timeout(Duration::from_secs(20));
        go_tx.send(()).unwrap();
        let (acked, pushed, compacting) =
            served.unwrap_or_else(|_| panic!("operations waited for the compaction (parked at {step:?})"));
        op.join().unwrap();
        assert_eq!((acked, pushed, compacting.as_str()), (simple("OK"), Frame::Integer(1), "1"), "at {step:?}");
    }

    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&mut c, "compactions_total") == "0" || stat(&mut c, "compacting") == "1" {
        assert!(Instant::now() < deadline, "the compaction never finished");
        thread::sleep(Duration::from_millis(10));
    }
    server.stop().unwrap();
    let server = TestServer::start(config);
    let mut c = server.tcp();
    assert_eq!(text(&items(c.call(&["GET", &keep]))[4]), "survivor");
    for later in &pushed_during {
        assert_eq!(text(&items(c.call(&["GET", later]))[4]), "pushed during compaction");
    }
}

#[test]
fn blocking_fetch_wakes_when_a_scheduled_job_is_due() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    let id = new_id();
    let due = (crate::now_ms() + 150).to_string();
    assert_eq!(c.call(&["PUSH", "6", &id, "later", "AT", &due]), Frame::Integer(1));
    assert_eq!(text(&items(c.call(&["GET", &id]))[2]), "scheduled");
    let started = Instant::now();
    let got = items(c.call(&["FETCH", "1", "0", "5000", "6"]));
    assert_eq!(got.len(), 1);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(100) && took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn release_hands_reservations_back_to_the_head_and_survives_restart() {
    let data = TempDir::new("server-release");
    let config = Config {
        durability: crate::storage::Durability::Strict,
        data_dir: Some(data.path().to_path_buf()),
        ..Config::default()
    };
    let (a, b, c, d) = (new_id(), new_id(), new_id(), new_id());
    {
        let server = TestServer::start(config.clone());
        let mut conn = server.unix();
        assert_eq!(conn.call(&["PUSHMANY", "1", "0", &a, "a", &b, "b"]), Frame::Integer(2));
        let fences: Vec<String> = items(conn.call(&["FETCH", "2", "0", "0", "1"]))
            .into_iter()
            .map(|r| int(&items(r)[2]).to_string())
            .collect();
        assert_eq!(error_code(&conn.call(&["RELEASE", &a, "1"])), "STALE");
        assert_eq!(error_code(&conn.call(&["RELEASE", &new_id(), "1"])), "NOTFOUND");
        assert_eq!(error_code(&conn.call(&["RELEASE", &a])), "ERR");
        assert_eq!(conn.call(&["RELEASE", &a, &fences[0]]), simple("OK"));
        assert_eq!(error_code(&conn.call(&["RELEASE", &a, &fences[0]])), "STALE");
        assert_eq!(error_code(&conn.call(&["ACK", &a, &fences[0]])), "STALE", "the released fence is dead");
        let job = items(conn.call(&["GET", &a]));
        assert_eq!((text(&job[2]), int(&job[3])), ("ready".into(), 0));

        assert_eq!(conn.call(&["PUSH", "1", &c, "c"]), Frame::Integer(1));
        let res = items(conn.call(&["RELEASEMANY", &b, &fences[1], &c, "1", &new_id(), "2"]));
        assert_eq!(res, vec![Frame::Integer(1), Frame::Integer(0), Frame::Integer(0)]);

        // A blocked FETCH is woken by a release.
        assert_eq!(conn.call(&["PUSH", "2", &d, "d"]), Frame::Integer(1));
        let fence_d = int(&items(items(conn.call(&["FETCH", "1", "0", "0", "2"])).remove(0))[2]).to_string();
        let mut waiter = server.tcp();
        let handle = thread::spawn(move || {
            let started = Instant::now();
            let got = items(waiter.call(&["FETCH", "1", "0", "10000", "2"]));
            (got, started.elapsed())
        });
        server.wait_blocked(1);
        assert_eq!(conn.call(&["RELEASE", &d, &fence_d]), simple("OK"));
        let (got, took) = handle.join().unwrap();
        assert_eq!(got.len(), 1);
        let r = items(got.into_iter().next().unwrap());
        assert_eq!((text(&r[0]), int(&r[3])), (d.clone(), 1), "the released attempt is not counted");
        assert!(took < Duration::from_secs(2), "took {took:?}");

        let stats = text(&conn.call(&["STATS"]));
        for line in ["released_total:3", "retried_total:0", "expired_leases_total:0", "ready:3", "reserved:1"] {
            assert!(stats.lines().any(|l| l == line), "{line} missing in\n{stats}");
        }
        server.stop().unwrap();
    }
    let server = TestServer::start(config);
    let mut conn = server.tcp();
    for id in [&a, &b, &c] {
        let job = items(conn.call(&["GET", id]));
        assert_eq!((text(&job[2]), int(&job[3])), ("ready".into(), 0), "{id}");
    }
    // Released to the head: b (released last) before a, then c.
    let got: Vec<String> =
        items(conn.call(&["FETCH", "10", "0", "0", "1"])).into_iter().map(|r| text(&items(r)[0])).collect();
    assert_eq!(got, vec![b, a, c]);
}

#[test]
fn nodes_announce_themselves_and_leave_and_a_job_command_never_sees_them() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    assert_eq!(c.call(&["NODES"]), Frame::Array(vec![]));
    assert_eq!(c.call(&["NODE", "node-b", "60000", r#"{"pid":2}"#]), simple("OK"));
    assert_eq!(c.call(&["NODE", "node-a", "60000", r#"{"pid":1}"#]), simple("OK"));
    assert_eq!(c.call(&["NODE", "node-c", "1", "{}"]), simple("OK"));
    // Wall time: node-c's 1 ms TTL runs out on the server's monotonic clock.
    std::thread::sleep(Duration::from_millis(5));
    let nodes = items(c.call(&["NODES"]));
    assert_eq!(nodes.len(), 2, "node-c's 1 ms expired");
    let first = items(nodes[0].clone());
    assert_eq!((text(&first[0]), int(&first[2]), text(&first[3])), ("node-a".into(), 60_000, r#"{"pid":1}"#.into()));
    assert!(int(&first[1]) < 60_000);
    assert_eq!(c.call(&["NODE", "node-a", "0", ""]), simple("OK"), "a node leaving");
    let left = items(c.call(&["NODES"]));
    assert_eq!(text(&items(left[0].clone())[0]), "node-b");
    let stats = text(&c.call(&["STATS"]));
    assert!(stats.contains("ready:0\r\n") && stats.contains("pushed_total:0\r\n"), "presence is not job state");
}

/// Issue 18 item 16: what a dashboard needs of each channel, over the
/// wire: counts by state and the job at the head of the ready queue.
#[test]
fn channels_reports_counts_and_the_head_of_each_ready_queue() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    assert_eq!(c.call(&["CHANNELS"]), Frame::Array(vec![]));
    let (first, second, later, held) = (new_id(), new_id(), new_id(), new_id());
    assert_eq!(c.call(&["PUSH", "5", &held, "h"]), Frame::Integer(1));
    assert_eq!(items(c.call(&["FETCH", "1", "0", "0", "5"])).len(), 1);
    for id in [&first, &second] {
        assert_eq!(c.call(&["PUSH", "5", id, "p"]), Frame::Integer(1));
    }
    assert_eq!(c.call(&["PUSH", "8", &later, "s", "IN", "60000"]), Frame::Integer(1));
    let rows: Vec<Vec<Frame>> = items(c.call(&["CHANNELS"])).into_iter().map(items).collect();
    let row = |r: &Vec<Frame>| (int(&r[0]), int(&r[1]), int(&r[2]), int(&r[3]), int(&r[4]), text(&r[5]));
    assert_eq!(row(&rows[0]), (5, 2, 0, 1, 0, first.clone()), "channel 5: two ready, the first pushed at the head");
    assert_eq!(row(&rows[1]), (8, 0, 1, 0, 0, String::new()), "channel 8: one scheduled, none ready");
    assert_eq!(c.call(&["CANCEL", &first]), Frame::Integer(1));
    let rows: Vec<Vec<Frame>> = items(c.call(&["CHANNELS", "5", "6"])).into_iter().map(items).collect();
    assert_eq!(row(&rows[0]), (5, 1, 0, 1, 0, second), "a cancelled head is passed over");
    assert_eq!(row(&rows[1]), (6, 0, 0, 0, 0, String::new()), "a channel asked for and empty");
}

/// Issue 18 item 15: a delay that runs past i64::MAX milliseconds is
/// saturated to the largest due time the protocol can show (never in
/// practice), not wrapped to a negative due time that is already past.
#[test]
fn out_of_range_delays_saturate_instead_of_wrapping() {
    let server = TestServer::memory();
    let mut c = server.tcp();
    let max = i64::MAX.to_string();
    let (retried, pushed, many) = (new_id(), new_id(), new_id());
    assert_eq!(c.call(&["PUSH", "9", &retried, "r"]), Frame::Integer(1));
    let fence = match &items(c.call(&["FETCH", "1", "0", "0", "9"]))[..] {
        [Frame::Array(r)] => match r[2] {
            Frame::Integer(f) => f.to_string(),
            ref other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert_eq!(c.call(&["RETRY", &retried, &fence, &max]), simple("OK"));
    assert_eq!(c.call(&["PUSH", "9", &pushed, "p", "IN", &max]), Frame::Integer(1));
    assert_eq!(c.call(&["PUSHMANY", "9", "IN", &max, &many, "m"]), Frame::Integer(1));
    for id in [&retried, &pushed, &many] {
        let job = items(c.call(&["GET", id]));
        assert_eq!(text(&job[2]), "scheduled", "{id}");
        assert_eq!(job[5], Frame::Integer(i64::MAX), "due time of {id}");
    }
    assert_eq!(items(c.call(&["FETCH", "3", "0", "0", "9"])).len(), 0, "none of them is due");
    // A time or delay a RESP integer cannot carry is refused outright.
    for args in [
        &["PUSH", "9", &new_id(), "x", "AT", "9223372036854775808"][..],
        &["PUSH", "9", &new_id(), "x", "IN", "18446744073709551616"],
        &["RETRY", &retried, "1", "9223372036854775808"],
    ] {
        match c.call(args) {
            Frame::Error(text) => assert!(text.starts_with(b"ERR"), "{args:?}: {}", String::from_utf8_lossy(&text)),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}
