//! Who may use the port, tested on the real binary over TCP (issue 18,
//! items 4 to 8): idle and unauthenticated connections cannot lock
//! authenticated clients out, a failed AUTH is slow and closes, an HTTP
//! request is not run as commands, a public address needs a password (kept
//! off the command line), and HELLO is answered.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::engine::JobId;
use solid_engine::resp::{self, Frame};
use support::{bound_tcp_port, wait_until_up, KillOnDrop, TempDir, BIN};

type Client = support::Client<TcpStream>;

/// The server process, its stderr in a file; killed and reaped on drop.
struct Server {
    child: KillOnDrop,
    port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl Server {
    fn start(tag: &str, args: &[&str]) -> Server {
        Server::start_with_env(tag, args, &[])
    }

    fn start_with_env(tag: &str, args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = TempDir::new(tag);
        let log = dir.0.join("server.log");
        let mut command = Command::new(BIN);
        command.args(["--listen", "tcp://127.0.0.1:0"]).args(args).stdout(Stdio::null());
        command.stderr(std::fs::File::create(&log).unwrap());
        command.env_remove("SOLID_ENGINE_PASSWORD");
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = KillOnDrop(command.spawn().unwrap());
        let port = wait_until_up(|| {
            assert!(child.alive(), "the server exited: {}", std::fs::read_to_string(&log).unwrap_or_default());
            bound_tcp_port(&log)
        });
        wait_until_up(|| TcpStream::connect(("127.0.0.1", port)).ok());
        Server { child, port, log, _dir: dir }
    }

    fn connect(&self) -> Client {
        Client::connect_tcp(self.port).unwrap()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Client {
    fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads until the server closes; the replies seen on the way.
    fn until_closed(&mut self) -> Vec<Frame> {
        let mut seen = Vec::new();
        loop {
            match self.read() {
                Ok(frame) => seen.push(frame),
                Err(e) if e.kind() == ErrorKind::WouldBlock => panic!("no reply within 10 s"),
                Err(_) => return seen, // end of stream, or a reset
            }
        }
    }
}

fn simple(s: &str) -> Frame {
    Frame::Simple(s.as_bytes().to_vec())
}

fn code(frame: &Frame) -> String {
    match frame {
        Frame::Error(e) => String::from_utf8_lossy(e).split(' ').next().unwrap().to_string(),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Item 4: connections that never finish a request (here, one byte each,
/// more of them than `max_connections`) do not keep a worker out.
#[test]
fn idle_one_byte_connections_do_not_lock_workers_out() {
    let server = Server::start("slowloris", &[]);
    let mut idle = Vec::new();
    for _ in 0..1100 {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let _ = s.write_all(b"P");
        idle.push(s);
    }
    let mut worker = server.connect();
    assert_eq!(worker.call(&["PING"]), simple("PONG"));
    assert_eq!(worker.call(&["PUSH", "1", &JobId::random().to_string(), "x"]), Frame::Integer(1));
}

/// Item 4 with a password: a flood of unauthenticated connections neither
/// locks an authenticated worker out nor keeps a new one from getting in.
#[test]
fn unauthenticated_connections_have_their_own_small_cap() {
    let server = Server::start("unauth-cap", &["--password", "pw", "--max-connections", "4"]);
    let mut worker = server.connect();
    assert_eq!(worker.call(&["AUTH", "pw"]), simple("OK"));
    let mut idle = Vec::new();
    for _ in 0..200 {
        let mut c = server.connect();
        c.send_raw(b"PING\r\n");
        idle.push(c);
    }
    assert_eq!(worker.call(&["PING"]), simple("PONG"), "the authenticated worker is still served");
    let mut late = server.connect();
    assert_eq!(late.call(&["AUTH", "pw"]), simple("OK"), "a new worker still gets in");
    assert!(matches!(late.call(&["STATS"]), Frame::Bulk(_)));
    // The oldest unauthenticated connections made room: they were closed.
    let closed = idle.iter_mut().take(100).map(|c| c.until_closed().len()).filter(|&n| n <= 1).count();
    assert_eq!(closed, 100, "the oldest unauthenticated connections are closed");
}

/// Item 4: a connection that does not authenticate within the handshake
/// timeout is told so and closed; an authenticated one may stay idle.
#[test]
fn a_connection_that_does_not_authenticate_in_time_is_closed() {
    let server = Server::start("handshake", &["--password", "pw", "--handshake-timeout-ms", "300"]);
    let mut worker = server.connect();
    assert_eq!(worker.call(&["AUTH", "pw"]), simple("OK"));
    let started = Instant::now();
    let mut idle = server.connect();
    assert_eq!(idle.call(&["PING"]), simple("PONG"));
    let rest = idle.until_closed();
    assert!(started.elapsed() < Duration::from_secs(5), "closed after the handshake timeout");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(code(&rest[0]), "ERR");
    // Wall time: the worker outlives a 300 ms deadline it must not have (an absence: nothing to poll).
    thread::sleep(Duration::from_millis(400));
    assert_eq!(worker.call(&["PING"]), simple("PONG"), "authenticated connections have no handshake deadline");
}

/// Item 5: one wrong password costs the delay and the connection; guesses
/// pipelined behind it are never compared.
#[test]
fn a_failed_auth_is_delayed_and_closes_the_connection() {
    let server = Server::start("auth-fail", &["--password", "right"]);
    let mut c = server.connect();
    let started = Instant::now();
    c.send_raw(b"AUTH wrong1\r\nAUTH wrong2\r\nAUTH right\r\nPING\r\n");
    let replies = c.until_closed();
    assert!(started.elapsed() >= Duration::from_millis(150), "failure answered after {:?}", started.elapsed());
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(code(&replies[0]), "WRONGPASS");
    let mut ok = server.connect();
    assert_eq!(ok.call(&["AUTH", "right"]), simple("OK"), "a right password is not delayed out");
}

/// Item 6: an HTTP request (curl -X POST with commands as its body) closes
/// the connection at its first line: the body never runs.
#[test]
fn an_http_post_is_not_run_as_commands() {
    let server = Server::start("http", &[]);
    let id = JobId::random().to_string();
    let body = format!("PUSH 1 {id} from-http\r\n");
    let out = Command::new("curl")
        .args(["-s", "-m", "5", "-X", "POST", "--data-binary", &body])
        .arg(format!("http://127.0.0.1:{}/", server.port))
        .output()
        .expect("curl runs");
    assert!(out.stdout.is_empty(), "no reply to HTTP: {:?}", String::from_utf8_lossy(&out.stdout));
    let mut c = server.connect();
    assert_eq!(c.call(&["GET", &id]), Frame::Null, "the POST body created a job");

    for request in [
        format!("POST / HTTP/1.1\r\nHost: x\r\n\r\nPUSH 1 {id} raw\r\n"),
        format!("GET /{id} HTTP/1.1\r\n\r\nPUSH 1 {id} raw\r\n"),
        format!("Host: 127.0.0.1\r\nPUSH 1 {id} raw\r\n"),
    ] {
        let mut raw = server.connect();
        raw.send_raw(request.as_bytes());
        assert_eq!(raw.until_closed(), vec![], "{request:?}");
        assert_eq!(c.call(&["GET", &id]), Frame::Null, "{request:?}");
    }
    assert!(server.log_text().contains("HTTP"), "logged: {}", server.log_text());
}

/// Item 7: a public address needs a password or an explicit --insecure.
#[test]
fn a_public_address_without_a_password_refuses_to_start() {
    let listen = "tcp://0.0.0.0:0".to_string();
    let (status, stderr) = run_briefly(&["--listen", &listen]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(stderr.contains("0.0.0.0") && stderr.contains("--insecure"), "{stderr}");

    let insecure = Server::start("insecure", &["--listen", &listen, "--insecure"]);
    assert_eq!(insecure.connect().call(&["PING"]), simple("PONG"));
    drop(insecure);
    // Loopback and Unix sockets need neither.
    let dir = TempDir::new("unix-ok");
    let sock = format!("unix://{}", dir.0.join("s.sock").display());
    let local = Server::start(
        "loopback",
        &["--listen", &sock, "--listen", "tcp://127.0.0.2:0", "--listen", "tcp://localhost:0"],
    );
    assert_eq!(local.connect().call(&["PING"]), simple("PONG"));
}

/// Item 7: the password from a file or the environment, never on the
/// command line, never in the log.
#[test]
fn the_password_comes_from_a_file_or_the_environment_and_stays_secret() {
    let secret = "s3cret-from-file";
    let dir = TempDir::new("pwfile");
    let file = dir.0.join("password");
    std::fs::write(&file, format!("{secret}\n")).unwrap();
    let listen = "tcp://0.0.0.0:0".to_string();
    let server = Server::start("pwfile-server", &["--listen", &listen, "--password-file", file.to_str().unwrap()]);
    let mut c = server.connect();
    assert_eq!(code(&c.call(&["STATS"])), "NOAUTH");
    assert_eq!(c.call(&["AUTH", secret]), simple("OK"), "the trailing newline is not part of the password");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(secret));
    let mut wrong = server.connect();
    assert_eq!(code(&wrong.call(&["AUTH", "nope"])), "WRONGPASS");
    drop(server);

    let env_secret = "s3cret-from-env";
    let server = Server::start_with_env("pwenv", &["--listen", &listen], &[("SOLID_ENGINE_PASSWORD", env_secret)]);
    let mut c = server.connect();
    assert_eq!(code(&c.call(&["STATS"])), "NOAUTH");
    assert_eq!(c.call(&["AUTH", env_secret]), simple("OK"));
    let log = server.log_text();
    assert!(!log.contains(env_secret) && !log.contains(secret), "{log}");

    // A missing file is a configuration error naming the file, not a secret.
    let (status, stderr) = run_briefly(&["--password-file", "/nonexistent/pw", "--listen", &listen]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/pw"), "{stderr}");
    let (status, stderr) =
        run_briefly(&["--password", "x", "--password-file", file.to_str().unwrap(), "--listen", &listen]);
    assert_eq!(status, Some(2), "two sources of the password are ambiguous: {stderr}");
    assert!(!stderr.contains(secret), "{stderr}");
}

/// Runs the binary for at most 3 s (a server that starts is killed): its
/// exit code (None when it was still running) and stderr.
fn run_briefly(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("SOLID_ENGINE_PASSWORD")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    (status, stderr)
}

fn map_field<'a>(items: &'a [Frame], key: &str) -> &'a Frame {
    let i = items.iter().position(|f| *f == Frame::Bulk(key.as_bytes().to_vec())).unwrap_or_else(|| panic!("{key}"));
    &items[i + 1]
}

/// Item 8: HELLO 2 and HELLO 3 are answered with the fields clients read;
/// a RESP3 connection gets RESP3 nulls; HELLO AUTH authenticates.
#[test]
fn hello_is_answered_in_resp2_and_resp3() {
    let server = Server::start("hello", &["--password", "pw"]);
    let mut c = server.connect();
    assert_eq!(code(&c.call(&["HELLO", "3"])), "NOAUTH", "HELLO without AUTH before authenticating");
    match c.call(&["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "worker-1"]) {
        Frame::Array(items) => {
            assert_eq!(items.len(), 14, "{items:?}");
            assert_eq!(map_field(&items, "proto"), &Frame::Integer(2));
            assert_eq!(map_field(&items, "server"), &Frame::Bulk(b"solid-engine".to_vec()));
            assert_eq!(map_field(&items, "version"), &Frame::Bulk(env!("CARGO_PKG_VERSION").as_bytes().to_vec()));
            assert!(matches!(map_field(&items, "id"), Frame::Integer(_)));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(c.call(&["STATS"]), Frame::Bulk(_)), "HELLO AUTH authenticated");
    assert_eq!(c.call(&["GET", &JobId::random().to_string()]), Frame::Null);

    // RESP3: a map, and `_` for null. Raw bytes: our decoder is RESP2.
    let mut raw = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let unknown = JobId::random().to_string();
    let mut req = Vec::new();
    resp::write_command(&mut req, &["HELLO", "3", "AUTH", "default", "pw"]);
    resp::write_command(&mut req, &["GET", &unknown]);
    resp::write_command(&mut req, &["PING"]);
    raw.write_all(&req).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !got.ends_with(b"+PONG\r\n") && Instant::now() < deadline {
        let mut chunk = [0u8; 4096];
        match raw.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("%7\r\n"), "{text}");
    assert!(text.contains("$5\r\nproto\r\n:3\r\n"), "{text}");
    assert!(text.ends_with("\r\n_\r\n+PONG\r\n"), "{text}");

    let mut bad = server.connect();
    assert_eq!(bad.call(&["AUTH", "pw"]), simple("OK"));
    assert_eq!(code(&bad.call(&["HELLO", "4"])), "NOPROTO");
    assert_eq!(bad.call(&["PING"]), simple("PONG"), "NOPROTO keeps the connection");
    let mut wrong = server.connect();
    assert_eq!(code(&wrong.call(&["HELLO", "3", "AUTH", "default", "nope"])), "WRONGPASS");
    assert_eq!(wrong.until_closed(), vec![]);
}
