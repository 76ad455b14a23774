//! Process-level tests of the real binary: SIGKILL in the middle of a
//! stream of pushes loses nothing the server confirmed; SIGTERM shuts down
//! cleanly; bad flags exit 2.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::engine::JobId;
use solid_engine::resp::Frame;
use support::{wait_until_up, Client, KillOnDrop, TempDir, BIN};

fn start(args: &[&str], socket: &Path) -> (KillOnDrop, Client) {
    let child = Command::new(BIN).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let server = KillOnDrop(child);
    let client = wait_until_up(|| Client::connect(socket).ok());
    (server, client)
}

fn kill_and_recover(durability: &str) {
    let dir = TempDir::new(durability);
    let socket = dir.0.join("engine.sock");
    let data = dir.0.join("data");
    let args = [
        "--listen",
        &format!("unix://{}", socket.display()),
        "--durability",
        durability,
        "--data-dir",
        data.to_str().unwrap(),
    ];
    let (mut child, mut client) = start(&args, &socket);

    // Some jobs go all the way through before the crash.
    let acked = JobId::random().to_string();
    assert_eq!(client.call(&["PUSH", "1", &acked, "done"]), Frame::Integer(1));
    let reserved = match client.call(&["FETCH", "1", "0", "0", "1"]) {
        Frame::Array(mut items) => match items.remove(0) {
            Frame::Array(r) => r,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let fence = match &reserved[2] {
        Frame::Integer(f) => f.to_string(),
        other => panic!("{other:?}"),
    };
    assert_eq!(client.call(&["ACK", &acked, &fence]), Frame::Simple(b"OK".to_vec()));

    // Producers push until the server dies; they remember what was confirmed.
    let stop = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (socket, stop, counted) = (socket.clone(), stop.clone(), counted.clone());
            thread::spawn(move || {
                let mut client = Client::connect(&socket).unwrap();
                let mut confirmed = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let ids: Vec<String> = (0..10).map(|_| JobId::random().to_string()).collect();
                    let mut args = vec!["PUSHMANY".to_string(), p.to_string(), "0".into()];
                    for id in &ids {
                        args.push(id.clone());
                        args.push(format!("payload-{n}"));
                    }
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    match client.try_call(&args) {
                        Ok(Frame::Integer(10)) => {
                            confirmed.extend(ids);
                            counted.fetch_add(10, Ordering::Relaxed);
                        }
                        Ok(other) => panic!("unexpected reply {other:?}"),
                        Err(_) => break, // the server was killed mid-request: not confirmed
                    }
                }
                confirmed
            })
        })
        .collect();
    // Killed in the middle of the stream, once some of it was confirmed.
    const CONFIRMED_BEFORE_KILL: usize = 200;
    let deadline = Instant::now() + Duration::from_secs(20);
    while counted.load(Ordering::Relaxed) < CONFIRMED_BEFORE_KILL {
        let seen = counted.load(Ordering::Relaxed);
        assert!(Instant::now() < deadline, "only {seen} jobs confirmed in 20 s");
        thread::sleep(Duration::from_millis(5));
    }
    child.kill(); // SIGKILL
    stop.store(true, Ordering::Relaxed);
    let confirmed: Vec<String> = producers.into_iter().flat_map(|p| p.join().unwrap()).collect();
    assert!(confirmed.len() >= CONFIRMED_BEFORE_KILL, "only {} jobs confirmed before the kill", confirmed.len());

    let (mut child, mut client) = start(&args, &socket);
    for id in &confirmed {
        match client.call(&["GET", id]) {
            Frame::Array(job) => assert_eq!(job[2], Frame::Bulk(b"ready".to_vec()), "{id}"),
            other => panic!("confirmed job {id} lost after SIGKILL ({durability}): {other:?}"),
        }
    }
    match client.call(&["GET", &acked]) {
        Frame::Array(job) => assert_eq!(job[2], Frame::Bulk(b"completed".to_vec())),
        other => panic!("{other:?}"),
    }
    child.kill();
}

#[test]
fn sigkill_loses_no_confirmed_job_in_strict_mode() {
    kill_and_recover("strict");
}

#[test]
fn sigkill_loses_no_confirmed_job_in_balanced_mode() {
    kill_and_recover("balanced");
}

#[test]
fn sigterm_shuts_down_cleanly_and_removes_the_socket() {
    let dir = TempDir::new("sigterm");
    let socket = dir.0.join("engine.sock");
    let (mut child, mut client) = start(&["--listen", &format!("unix://{}", socket.display())], &socket);
    assert_eq!(client.call(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert_eq!(child.terminate(), Some(0));
    assert!(!socket.exists());
}

#[test]
fn bad_flags_exit_2() {
    for args in [&["--durability", "strict"][..], &["--nope"], &["--listen", "http://x"], &["--lease-ms", "x"]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("--durability"));
}
