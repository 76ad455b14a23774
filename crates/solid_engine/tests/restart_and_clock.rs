//! Process-level tests of issue 18's order, repair and clock items: the
//! real binary, restarted with SIGTERM or SIGKILL, its log damaged by hand,
//! its wall clock stepped with libfaketime while it runs.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::engine::JobId;
use solid_engine::resp::Frame;
use support::{wait_until_up, Client, KillOnDrop, TempDir, BIN};

impl Client {
    /// FETCH: (id, fence) of each reservation.
    fn fetch(&mut self, count: usize, lease_ms: u64, channel: &str) -> Vec<(String, String)> {
        match self.call(&["FETCH", &count.to_string(), &lease_ms.to_string(), "0", channel]) {
            Frame::Array(list) => list
                .into_iter()
                .map(|r| match r {
                    Frame::Array(r) => match (&r[0], &r[2]) {
                        (Frame::Bulk(id), Frame::Integer(fence)) => {
                            (String::from_utf8(id.clone()).unwrap(), fence.to_string())
                        }
                        other => panic!("{other:?}"),
                    },
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    /// Polls GET until job `id` is ready (a due time or a lease ran out on
    /// the server's clock), for at most 10 s; fails with the state last seen.
    fn wait_ready(&mut self, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let state = match self.call(&["GET", id]) {
                Frame::Array(job) => job[2].clone(),
                other => other,
            };
            if state == Frame::Bulk(b"ready".to_vec()) {
                return;
            }
            assert!(Instant::now() < deadline, "{id} still {state:?} after 10 s");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn ok() -> Frame {
    Frame::Simple(b"OK".to_vec())
}

/// The server process, its stderr in a file; SIGKILLed and reaped on drop.
struct Server {
    child: KillOnDrop,
    stderr: PathBuf,
}

impl Server {
    fn start(args: &[String], env: &[(&str, String)], socket: &Path) -> (Server, Client) {
        let stderr = socket.with_extension(format!("stderr-{}", Instant::now().elapsed().as_nanos()));
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&stderr).unwrap();
        let mut command = Command::new(BIN);
        command.args(args).stdout(Stdio::null()).stderr(log);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut server = Server { child: KillOnDrop(command.spawn().unwrap()), stderr };
        let client = wait_until_up(|| {
            if let Ok(client) = Client::connect(socket) {
                return Some(client);
            }
            if let Some(status) = server.child.0.try_wait().unwrap() {
                panic!("server exited with {status}: {}", server.log());
            }
            None
        });
        (server, client)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn terminate(&mut self) {
        let code = self.child.terminate();
        assert_eq!(code, Some(0), "{}", self.log());
    }

    fn kill(&mut self) {
        self.child.kill();
    }
}

fn durable_args(dir: &TempDir, durability: &str) -> (Vec<String>, PathBuf, PathBuf) {
    let socket = dir.0.join("engine.sock");
    let data = dir.0.join("data");
    let args = vec![
        "--listen".to_string(),
        format!("unix://{}", socket.display()),
        "--durability".into(),
        durability.into(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    (args, socket, data)
}

fn new_id() -> String {
    JobId::random().to_string()
}

/// Issue 18 item 9: RETRY 0, a RETRY whose delay fell due, a `PUSH IN`
/// that was promoted, a lease that expired and a reservation held at the
/// restart keep their live place in the FIFO after SIGTERM and after
/// SIGKILL (main moved every one of them behind later pushes).
fn restart_keeps_fifo_order(durability: &str, crash: bool) {
    let dir = TempDir::new(&format!("order-{durability}-{crash}"));
    let (args, socket, _) = durable_args(&dir, durability);
    let (mut server, mut c) = Server::start(&args, &[], &socket);
    let [a, b, s, d, e, x, h] = std::array::from_fn(|_| new_id());
    for id in [&a, &b] {
        assert_eq!(c.call(&["PUSH", "1", id, "p"]), Frame::Integer(1));
    }
    let got = c.fetch(1, 0, "1");
    assert_eq!(got[0].0, a);
    assert_eq!(c.call(&["RETRY", &a, &got[0].1, "0"]), ok()); // b, a
    assert_eq!(c.call(&["PUSH", "1", &s, "p", "IN", "150"]), Frame::Integer(1));
    assert_eq!(c.call(&["PUSH", "1", &d, "p"]), Frame::Integer(1)); // b, a, d
    c.wait_ready(&s); // s promoted: b, a, d, s
    assert_eq!(c.call(&["PUSH", "1", &e, "p"]), Frame::Integer(1)); // b, a, d, s, e
    let got = c.fetch(1, 0, "1");
    assert_eq!(got[0].0, b);
    assert_eq!(c.call(&["RETRY", &b, &got[0].1, "100"]), ok());
    c.wait_ready(&b); // b fell due: a, d, s, e, b
    assert_eq!(c.call(&["PUSH", "1", &x, "p"]), Frame::Integer(1)); // a, d, s, e, b, x

    // a leaves with a short lease that expires back to the head (long
    // enough that a slow host still fetches d next); d stays held until
    // the restart, which requeues it at the head too.
    let got = c.fetch(1, 1_000, "1");
    assert_eq!(got[0].0, a);
    let held = c.fetch(1, 60_000, "1");
    assert_eq!(held[0].0, d);
    c.wait_ready(&a); // a expired: a, s, e, b, x
    assert_eq!(c.call(&["PUSH", "1", &h, "p"]), Frame::Integer(1)); // a, s, e, b, x, h
    if crash {
        server.kill();
    } else {
        server.terminate();
    }
    let (mut server, mut c) = Server::start(&args, &[], &socket);
    let order: Vec<String> = c.fetch(10, 0, "1").into_iter().map(|r| r.0).collect();
    let names = |ids: &[String]| -> Vec<&str> {
        ids.iter()
            .map(|id| {
                ["a", "b", "s", "d", "e", "x", "h"][[&a, &b, &s, &d, &e, &x, &h].iter().position(|k| *k == id).unwrap()]
            })
            .collect()
    };
    assert_eq!(names(&order), ["d", "a", "s", "e", "b", "x", "h"], "{durability} crash={crash}");
    server.terminate();
}

#[test]
fn sigterm_restart_keeps_the_live_fifo_order() {
    restart_keeps_fifo_order("strict", false);
    restart_keeps_fifo_order("balanced", false);
}

#[test]
fn sigkill_restart_keeps_the_live_fifo_order() {
    restart_keeps_fifo_order("strict", true);
}

fn only_log(data: &Path) -> PathBuf {
    let logs: Vec<_> = std::fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    logs[0].clone()
}

fn repair(data: &Path, extra: &[&str], stdin: &str) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(["--repair", "--data-dir", data.to_str().unwrap()])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// Issue 18 item 10: a zero-filled torn tail is cut with a log line saying
/// what was dropped; mid-log corruption still refuses to start, and
/// `--repair` cuts there only once confirmed (`--yes`, or "y" on stdin).
#[test]
fn torn_zero_tail_is_cut_and_repair_fixes_mid_log_corruption() {
    let dir = TempDir::new("repair");
    let (args, socket, data) = durable_args(&dir, "strict");
    let (first, second, third) = (new_id(), new_id(), new_id());
    let (mut server, mut c) = Server::start(&args, &[], &socket);
    for id in [&first, &second] {
        assert_eq!(c.call(&["PUSH", "1", id, "payload"]), Frame::Integer(1));
    }
    server.terminate();
    let log = only_log(&data);
    let good = std::fs::read(&log).unwrap();
    let record = (good.len() - 20) / 2; // header 20 bytes, two records alike

    // Torn: the start of a third record, then the zeros of an unwritten block.
    let mut torn = good.clone();
    torn.extend_from_slice(&good[20..20 + record - 7]);
    torn.resize(good.len() + 4096, 0);
    std::fs::write(&log, &torn).unwrap();
    let (mut server, mut c) = Server::start(&args, &[], &socket);
    assert!(matches!(c.call(&["GET", &second]), Frame::Array(_)));
    server.terminate();
    let text = server.log();
    assert!(text.contains("truncated=4096 bytes at offset"), "{text}");
    assert!(text.contains("then") && text.contains("zero bytes"), "{text}");
    assert_eq!(std::fs::read(&log).unwrap(), good);

    // Real corruption in the middle: refuses to start, points at --repair.
    let (mut server, mut c) = Server::start(&args, &[], &socket);
    assert_eq!(c.call(&["PUSH", "1", &third, "payload"]), Frame::Integer(1));
    server.terminate();
    let mut bad = std::fs::read(&log).unwrap();
    let second_at = 20 + record;
    bad[second_at + 30] ^= 0x40;
    std::fs::write(&log, &bad).unwrap();
    let out = Command::new(BIN).args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("offset {second_at}")) && stderr.contains("--repair"), "{stderr}");

    // Declined (or no answer): nothing changes.
    for answer in ["n\n", ""] {
        let (code, text) = repair(&data, &[], answer);
        assert_eq!(code, Some(1), "{text}");
        assert!(text.contains(&format!("offset {second_at}")), "{text}");
        assert_eq!(std::fs::read(&log).unwrap(), bad);
    }
    let (code, text) = repair(&data, &[], "y\n");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), second_at as u64);
    let (code, text) = repair(&data, &["--yes"], "");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("nothing to repair"), "{text}");

    let (mut server, mut c) = Server::start(&args, &[], &socket);
    assert!(matches!(c.call(&["GET", &first]), Frame::Array(_)));
    assert_eq!(c.call(&["GET", &second]), Frame::Null);
    assert_eq!(c.call(&["GET", &third]), Frame::Null);
    server.terminate();
}

const FAKETIME: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

/// Replaces the offset file at once, so the server never reads half of it.
fn step(file: &Path, offset: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{offset}\n")).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// A durable server whose wall clock the test steps (libfaketime reads the
/// offset file on every call; CLOCK_MONOTONIC stays real, as when NTP or an
/// operator steps the host), with two connected workers.
fn faked_clock_server(dir: &TempDir) -> (Server, Client, Client, PathBuf) {
    let Some(library) = FAKETIME.iter().find(|p| Path::new(p).exists()) else {
        panic!("libfaketime is not installed (Debian package faketime; bin/setup installs it)");
    };
    let (args, socket, _) = durable_args(dir, "strict");
    let offset = dir.0.join("faketime");
    step(&offset, "+0s");
    let env = [
        ("LD_PRELOAD", library.to_string()),
        ("FAKETIME_TIMESTAMP_FILE", offset.display().to_string()),
        ("FAKETIME_NO_CACHE", "1".to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
    ];
    let (server, worker) = Server::start(&args, &env, &socket);
    let other = Client::connect(&socket).unwrap();
    (server, worker, other, offset)
}

/// Issue 18 item 11: the server's wall clock stepped +120 s while a job is
/// held must not hand it to a second worker (main did at once, and the
/// holder's ACK was STALE).
#[test]
fn wall_clock_stepped_forward_keeps_a_held_lease() {
    let dir = TempDir::new("clock-forward");
    let (mut server, mut worker, mut other, offset) = faked_clock_server(&dir);
    let held = new_id();
    assert_eq!(worker.call(&["PUSH", "1", &held, "p"]), Frame::Integer(1));
    let got = worker.fetch(1, 10_000, "1");
    assert_eq!(got[0].0, held);
    step(&offset, "+120s");
    // Wall time: ~30 housekeeping ticks run on the stepped clock (an absence: nothing to poll).
    thread::sleep(Duration::from_millis(300));
    assert!(other.fetch(1, 0, "1").is_empty(), "a held job went to a second worker after a +120 s step");
    assert_eq!(worker.call(&["ACK", &held, &got[0].1]), ok());
    server.terminate();
}

/// Issue 18 item 11: stepped -3600 s, a 1 s lease still ends after about
/// 1 s (main held it for the hour).
#[test]
fn wall_clock_stepped_back_does_not_stretch_a_lease() {
    let dir = TempDir::new("clock-back");
    let (mut server, mut worker, mut other, offset) = faked_clock_server(&dir);
    let short = new_id();
    assert_eq!(worker.call(&["PUSH", "1", &short, "p"]), Frame::Integer(1));
    let got = worker.fetch(1, 1_000, "1");
    assert_eq!(got[0].0, short);
    let stepped = Instant::now();
    step(&offset, "-3600s");
    let deadline = Instant::now() + Duration::from_secs(5);
    let again = loop {
        let again = other.fetch(1, 0, "1");
        if !again.is_empty() || Instant::now() > deadline {
            break again;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        again.first().map(|r| r.0.as_str()),
        Some(short.as_str()),
        "1 s lease still held 5 s after a -3600 s step"
    );
    assert!(stepped.elapsed() < Duration::from_millis(2_500), "{:?}", stepped.elapsed());
    match worker.call(&["ACK", &short, &got[0].1]) {
        Frame::Error(text) => assert!(text.starts_with(b"STALE"), "{}", String::from_utf8_lossy(&text)),
        other => panic!("the expired holder's ACK must be STALE: {other:?}"),
    }
    server.terminate();
}
