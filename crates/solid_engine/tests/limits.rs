//! Issue 18, memory and waiters, against the real binary: a client cannot
//! make the server's memory grow without bound (pipelined GETs of a large
//! payload, a huge request, before AUTH too), checked under
//! `prlimit --as` so that unbounded growth kills the server instead of
//! swapping; a blocked FETCH from a client that hung up reserves nothing;
//! one PUSH wakes one of many blocked FETCHes, measured in server CPU.

mod support;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::engine::JobId;
use solid_engine::resp::{self, Frame};
use support::{wait_until_up, Client, KillOnDrop, TempDir};

/// The binary under test; `SOLID_ENGINE_SERVER_BIN` measures another build
/// (e.g. main's, for the before/after figures of the herd test).
fn bin() -> String {
    std::env::var("SOLID_ENGINE_SERVER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_solid-engine-server").into())
}
/// The address-space limit the memory tests run the server under. The
/// server's own steady use (threads' stacks and malloc arenas are address
/// space too) fits well inside; the floods of these tests need several
/// times more on a server that buffers without bound.
const AS_LIMIT: u64 = 1 << 30;

impl Client {
    /// A field of STATS.
    fn stat(&mut self, key: &str) -> u64 {
        let Frame::Bulk(text) = self.call(&["STATS"]) else { panic!("STATS") };
        let text = String::from_utf8(text).unwrap();
        let line = text.lines().find(|l| l.starts_with(&format!("{key}:"))).unwrap();
        line[key.len() + 1..].parse().unwrap()
    }

    /// Polls the STATS field `key` until it reads `want`, for at most
    /// `within`; fails with the value it last read.
    fn wait_for_stat(&mut self, key: &str, want: u64, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let seen = self.stat(key);
            if seen == want {
                return;
            }
            assert!(Instant::now() < deadline, "STATS {key} still {seen} after {within:?}, waited for {want}");
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Bytes received on `stream` and not read yet.
fn unread_bytes(stream: &impl std::os::fd::AsRawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through a valid pointer.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(rc, 0, "FIONREAD: {}", std::io::Error::last_os_error());
    n as usize
}

/// The server process; SIGKILLed and reaped on drop.
struct Server {
    child: KillOnDrop,
    socket: PathBuf,
    dir: TempDir,
}

impl Server {
    /// Starts the binary on a Unix socket, under `prlimit --as` when
    /// `as_limit` is given.
    fn start(tag: &str, as_limit: Option<u64>, args: &[&str]) -> Server {
        let dir = TempDir::new(tag);
        let socket = dir.0.join("engine.sock");
        let listen = format!("unix://{}", socket.display());
        let mut command = match as_limit {
            Some(bytes) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--as={bytes}")).arg("--").arg(bin());
                c
            }
            None => Command::new(bin()),
        };
        let log = std::fs::File::create(dir.0.join("server.log")).unwrap();
        let child = command.args(["--listen", &listen]).args(args).stdout(Stdio::null()).stderr(log).spawn();
        let server = Server { child: KillOnDrop(child.unwrap()), socket, dir };
        wait_until_up(|| Client::connect(&server.socket).ok());
        server
    }

    fn client(&self) -> Client {
        Client::connect(&self.socket).unwrap()
    }

    fn alive(&mut self) -> bool {
        self.child.alive()
    }

    /// A line of /proc/<pid>/status in KiB (VmHWM: peak resident set).
    fn status_kib(&self, key: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = text.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// User + system CPU time of the server so far, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after = &text[text.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of proc(5), counted from the state (field 3).
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as u64
}

/// Another client is served while a flood is going on: every call of a
/// short PUSH/FETCH/ACK round answers within the read timeout.
fn serve_a_round(client: &mut Client, round: usize) {
    let id = JobId::random().to_string();
    assert_eq!(client.call(&["PUSH", "7", &id, &format!("small-{round}")]), Frame::Integer(1));
    let Frame::Array(mut list) = client.call(&["FETCH", "1", "0", "0", "7"]) else { panic!("FETCH") };
    let Frame::Array(reservation) = list.remove(0) else { panic!("reservation") };
    let Frame::Integer(fence) = reservation[2] else { panic!("fence") };
    assert_eq!(client.call(&["ACK", &id, &fence.to_string()]), Frame::Simple(b"OK".to_vec()));
}

/// Item 1 and 3: 1,500 pipelined GETs of a 1 MiB payload ask for 1.5 GiB
/// of replies. A server that renders every reply of one read before writing
/// any needs more than the 1 GiB it may map and aborts; streaming replies
/// and not reading while they are unsent keeps it at a few MiB, and the
/// client that reads slowly still gets every reply, in order.
#[test]
fn pipelined_gets_of_a_large_payload_do_not_grow_the_server() {
    let mut server = Server::start("gets", Some(AS_LIMIT), &[]);
    let mut admin = server.client();
    let payload = vec![b'p'; 1 << 20];
    let id = JobId::random().to_string();
    admin.send(&[b"PUSH", b"3", id.as_bytes(), &payload]).unwrap();
    assert_eq!(admin.read().unwrap(), Frame::Integer(1));

    const GETS: usize = 1500;
    let mut flood = server.client();
    let mut requests = Vec::new();
    for _ in 0..GETS {
        resp::write_command(&mut requests, &["GET", id.as_str()]);
    }
    let mut writer = flood.stream.try_clone().unwrap();
    let sender = thread::spawn(move || writer.write_all(&requests).is_ok());

    // While the flood client reads nothing, others are served: once its
    // replies have begun arriving, the server is serving the flood (1.5 GiB
    // of replies cannot all be sent to a client that does not read).
    let deadline = Instant::now() + Duration::from_secs(10);
    while unread_bytes(&flood.stream) == 0 {
        assert!(server.alive(), "the server died during the flood");
        assert!(Instant::now() < deadline, "no reply to the flood within 10 s");
        thread::sleep(Duration::from_millis(5));
    }
    for round in 0..20 {
        serve_a_round(&mut admin, round);
        assert!(server.alive(), "the server died during the flood");
    }
    let held_kib = server.status_kib("VmRSS:");
    // Now the flood client reads every reply.
    for n in 0..GETS {
        match flood.read() {
            Ok(Frame::Array(job)) => assert_eq!(job[4], Frame::Bulk(payload.clone()), "reply {n}"),
            other => panic!("reply {n} of {GETS}: {other:?} (server alive: {})", server.alive()),
        }
    }
    assert!(sender.join().unwrap(), "the flood's requests were all accepted");
    serve_a_round(&mut admin, 99);
    let peak_kib = server.status_kib("VmHWM:");
    eprintln!("pipelined GETs: server RSS {held_kib} KiB while the flood was unread, peak {peak_kib} KiB");
    assert!(held_kib < 64 << 10, "server held {held_kib} KiB while the client did not read");
    assert!(peak_kib < 128 << 10, "server peaked at {peak_kib} KiB");
}

/// Item 2 and 3: a request that never ends (one array of 16 MiB bulk
/// strings, 1.5 GiB in all) sent before AUTH. The server answers an error
/// once the request passes its cap (default `max_request_bytes`) and closes
/// the connection; it neither dies under the 1 GiB limit nor stops serving
/// a client that authenticated.
#[test]
fn a_huge_request_before_auth_gets_an_error_and_is_closed() {
    let mut server = Server::start("huge", Some(AS_LIMIT), &["--password", "secret"]);
    let mut worker = server.client();
    assert_eq!(worker.call(&["AUTH", "secret"]), Frame::Simple(b"OK".to_vec()));

    let mut attacker = server.client();
    let mut writer = attacker.stream.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let chunk = vec![b'x'; 16 << 20];
        let mut header = b"*1000\r\n$4\r\nPUSH\r\n".to_vec();
        let mut sent = 0usize;
        for _ in 0..96 {
            header.extend_from_slice(format!("${}\r\n", chunk.len()).as_bytes());
            if writer
                .write_all(&header)
                .and_then(|_| writer.write_all(&chunk))
                .and_then(|_| writer.write_all(b"\r\n"))
                .is_err()
            {
                return sent;
            }
            header.clear();
            sent += chunk.len();
        }
        sent
    });
    let reply = attacker.read();
    let sent = sender.join().unwrap();
    assert!(server.alive(), "the server died of a huge request");
    match reply {
        Ok(Frame::Error(text)) => {
            let text = String::from_utf8_lossy(&text).to_string();
            assert!(text.starts_with("PROTO") && text.contains("max_request_bytes"), "{text}");
        }
        other => panic!("expected an error reply, got {other:?}"),
    }
    assert!(attacker.read().is_err(), "the connection is closed after the error");
    assert!(sent < 1 << 30, "the server read {sent} bytes of one request before refusing it");
    serve_a_round(&mut worker, 0);
    let peak_kib = server.status_kib("VmHWM:");
    eprintln!("huge request: refused after {} MiB sent; server peak RSS {peak_kib} KiB", sent >> 20);
}

/// Item 2: the largest payload and the request cap are configurable; a
/// bulk string over `max_payload_bytes` is refused from its header, before
/// its bytes arrive, and the connection closed.
#[test]
fn payload_and_request_caps_are_configurable() {
    let server = Server::start("caps", None, &["--max-payload-bytes", "1000", "--max-request-bytes", "4096"]);
    let mut client = server.client();
    let id = JobId::random().to_string();
    client.send(&[b"PUSH", b"1", id.as_bytes(), &[b'a'; 1000]]).unwrap();
    assert_eq!(client.read().unwrap(), Frame::Integer(1), "a payload at the cap is accepted");
    client.stream.write_all(b"*4\r\n$4\r\nPUSH\r\n$1\r\n1\r\n$36\r\n").unwrap();
    client.stream.write_all(JobId::random().to_string().as_bytes()).unwrap();
    client.stream.write_all(b"\r\n$1001\r\n").unwrap();
    match client.read() {
        Ok(Frame::Error(text)) => {
            let text = String::from_utf8_lossy(&text).to_string();
            assert!(text.starts_with("PROTO") && text.contains("max_payload_bytes"), "{text}");
        }
        other => panic!("expected an error reply, got {other:?}"),
    }
    assert!(client.read().is_err(), "closed after the error");

    // Many arguments, each under the payload cap, over the request cap.
    let mut client = server.client();
    let mut args: Vec<Vec<u8>> = vec![b"PUSHMANY".to_vec(), b"1".to_vec(), b"0".to_vec()];
    for _ in 0..8 {
        args.push(JobId::random().to_string().into_bytes());
        args.push(vec![b'b'; 900]);
    }
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let _ = client.send(&args);
    match client.read() {
        Ok(Frame::Error(text)) => assert!(String::from_utf8_lossy(&text).contains("max_request_bytes")),
        other => panic!("expected an error reply, got {other:?}"),
    }
    let mut other = server.client();
    assert_eq!(other.call(&["PING"]), Frame::Simple(b"PONG".to_vec()));
}

fn reservations(frame: Frame) -> Vec<Vec<Frame>> {
    let Frame::Array(list) = frame else { panic!("{frame:?}") };
    list.into_iter()
        .map(|r| match r {
            Frame::Array(items) => items,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Item 12: a FETCH blocked for a client that hung up reserves nothing: the
/// job pushed afterwards goes to a live worker at once, first attempt. The
/// hung-up connection is noticed while blocked and closed.
#[test]
fn a_blocked_fetch_whose_client_hung_up_reserves_nothing() {
    let server = Server::start("hangup", None, &[]);
    let mut admin = server.client();
    let wait = Duration::from_secs(10);

    // The dead waiter comes first, then a live one; a push goes to the live one.
    let mut dead = server.client();
    dead.send(&[b"FETCH", b"1", b"0", b"30000", b"5"]).unwrap();
    admin.wait_for_stat("blocked_fetches", 1, wait);
    let mut live = server.client();
    live.send(&[b"FETCH", b"1", b"0", b"5000", b"5"]).unwrap();
    admin.wait_for_stat("blocked_fetches", 2, wait);
    drop(dead);
    let first = JobId::random().to_string();
    assert_eq!(admin.call(&["PUSH", "5", &first, "one"]), Frame::Integer(1));
    let started = Instant::now();
    let got = reservations(live.read().unwrap());
    assert_eq!(got.len(), 1, "the live waiter got the job");
    assert_eq!(got[0][0], Frame::Bulk(first.into_bytes()));
    assert_eq!(got[0][3], Frame::Integer(1), "first attempt: never reserved for the dead client");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());

    // A dead waiter alone: the job stays ready for the next FETCH.
    let connected = admin.stat("connections");
    let mut dead = server.client();
    dead.send(&[b"FETCH", b"1", b"0", b"30000", b"6"]).unwrap();
    admin.wait_for_stat("blocked_fetches", 1, wait);
    drop(dead);
    let second = JobId::random().to_string();
    assert_eq!(admin.call(&["PUSH", "6", &second, "two"]), Frame::Integer(1));
    // The push woke the dead waiter, which saw the hang-up and closed.
    admin.wait_for_stat("connections", connected, wait);
    let got = reservations(admin.call(&["FETCH", "1", "0", "1000", "6"]));
    assert_eq!(got.len(), 1, "the job was left ready");
    assert_eq!(got[0][3], Frame::Integer(1));

    // Hung up while blocked, with nothing pushed: the connection is closed
    // within a few seconds, not when the 30 s block ends.
    let before = admin.stat("connections");
    let mut idle = server.client();
    idle.send(&[b"FETCH", b"1", b"0", b"30000", b"8"]).unwrap();
    admin.wait_for_stat("blocked_fetches", 1, wait);
    assert_eq!(admin.stat("connections"), before + 1);
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(5);
    while admin.stat("connections") > before {
        assert!(Instant::now() < deadline, "the hung-up blocked FETCH still holds its connection");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Item 12 over TCP: a worker killed while its FETCH is blocked leaves a
/// FIN behind; the job pushed afterwards is not reserved for it.
#[test]
fn a_blocked_fetch_over_tcp_whose_client_hung_up_reserves_nothing() {
    let server = Server::start("hangup-tcp", None, &["--listen", "tcp://127.0.0.1:0"]);
    let port = support::wait_until_up(|| support::bound_tcp_port(&server.dir.0.join("server.log")));
    let mut admin = server.client();
    let wait = Duration::from_secs(10);
    let connected = admin.stat("connections");
    let mut dead = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = Vec::new();
    resp::write_command(&mut request, &["FETCH", "1", "0", "30000", "5"]);
    dead.write_all(&request).unwrap();
    admin.wait_for_stat("blocked_fetches", 1, wait);
    drop(dead);
    let id = JobId::random().to_string();
    assert_eq!(admin.call(&["PUSH", "5", &id, "one"]), Frame::Integer(1));
    // The push woke the dead waiter, which saw the hang-up and closed.
    admin.wait_for_stat("connections", connected, wait);
    let got = reservations(admin.call(&["FETCH", "1", "0", "1000", "5"]));
    assert_eq!(got.len(), 1, "the job was left ready for a live worker");
    assert_eq!(got[0][3], Frame::Integer(1), "first attempt");
}

/// Raises this process's open-file limit (and so the server's, inherited)
/// to what 1,000 connections on both ends need.
fn raise_nofile(want: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-pointer for getrlimit, a valid value for setrlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_cur < want {
            limit.rlim_cur = want.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Item 13: with 1,000 FETCHes blocked on a channel, a PUSH to it wakes one
/// of them, not all: the server's CPU per PUSH stays near what it is with no
/// waiter. (Waking all 1,000 costs milliseconds of CPU per PUSH.)
#[test]
fn one_push_wakes_one_of_a_thousand_blocked_fetches() {
    // Every push takes one waiter away: start with enough that 1,000 are
    // still blocked at the last push.
    const PUSHES: usize = 500;
    const WAITERS: usize = 1000 + PUSHES;
    raise_nofile(3 * WAITERS as u64 + 256);
    // The waiters all connect before any sends its FETCH: room for all of
    // them in the handshake class too (64 by default, oldest evicted).
    let server = Server::start("herd", None, &["--max-connections", "2000", "--max-unauthenticated", "2000"]);
    let mut admin = server.client();
    // The server CPU of PUSHES pushes to `channel`, counted until `settled`
    // says the work they caused is done.
    let push_round = |admin: &mut Client, channel: &str, settled: &mut dyn FnMut()| {
        let ticks = server.cpu_ticks();
        let started = Instant::now();
        for n in 0..PUSHES {
            let id = JobId::random().to_string();
            assert_eq!(admin.call(&["PUSH", channel, &id, &format!("j{n}")]), Frame::Integer(1));
        }
        settled();
        let cpu_ms = (server.cpu_ticks() - ticks) as f64 * 1000.0 / ticks_per_second() as f64;
        (cpu_ms, started.elapsed())
    };
    // With no waiter (channel 2): a PUSH's work is done when it is answered.
    let (alone_ms, _) = push_round(&mut admin, "2", &mut || ());
    // Then with 1,000 waiting on channel 1.
    let mut waiters: Vec<Client> = (0..WAITERS).map(|_| server.client()).collect();
    for w in &mut waiters {
        w.send(&[b"FETCH", b"1", b"0", b"60000", b"1"]).unwrap();
    }
    admin.wait_for_stat("blocked_fetches", WAITERS as u64, Duration::from_secs(30));
    for w in &waiters {
        w.stream.set_nonblocking(true).unwrap();
    }
    // Done when every woken waiter's reply has arrived.
    let mut replied = vec![false; WAITERS];
    let mut all_replied = || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            for (w, seen) in waiters.iter_mut().zip(replied.iter_mut()) {
                let mut byte = [0u8; 1];
                if !*seen && w.stream.read(&mut byte).is_ok() {
                    *seen = true;
                }
            }
            let served = replied.iter().filter(|&&r| r).count();
            if served >= PUSHES {
                return;
            }
            assert!(Instant::now() < deadline, "{served} of {PUSHES} woken waiters replied within 30 s");
            thread::sleep(Duration::from_millis(5));
        }
    };
    let (herd_ms, took) = push_round(&mut admin, "1", &mut all_replied);
    let per_push = herd_ms / PUSHES as f64;
    eprintln!(
        "server CPU per PUSH: {:.3} ms with {WAITERS}..1000 blocked FETCHes ({PUSHES} pushes in {took:?}), {:.3} ms with none",
        per_push,
        alone_ms / PUSHES as f64
    );
    // Every push went to a distinct waiter, and the others still wait.
    let served = replied.iter().filter(|&&r| r).count();
    assert_eq!(served, PUSHES, "each push reserved for one waiter");
    assert_eq!(admin.stat("reserved"), PUSHES as u64, "each push reserved once");
    assert_eq!(admin.stat("blocked_fetches"), (WAITERS - PUSHES) as u64, "one waiter woken per push");
    assert!(per_push < 1.0, "{per_push:.3} ms of server CPU per PUSH with {WAITERS} blocked FETCHes");
}
