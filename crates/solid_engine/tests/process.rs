//! Process-level tests of the real binary: SIGKILL in the middle of a
//! stream of pushes loses nothing the server confirmed; SIGTERM shuts down
//! cleanly; bad flags exit 2.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::engine::JobId;
use solid_engine::resp::{self, Decoder, Frame, Mode};

const BIN: &str = env!("CARGO_BIN_EXE_solid-engine-server");

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("se-proc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Client {
    stream: UnixStream,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Client {
    fn connect(path: &Path) -> std::io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Client { stream, decoder: Decoder::new(Mode::Reply), buf: Vec::new() })
    }

    fn call(&mut self, args: &[&str]) -> std::io::Result<Frame> {
        let mut out = Vec::new();
        resp::write_command(&mut out, args);
        self.stream.write_all(&out)?;
        loop {
            let (used, frame) = self.decoder.decode(&self.buf).expect("valid reply");
            self.buf.drain(..used);
            if let Some(frame) = frame {
                return Ok(frame);
            }
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk)? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// The server process; SIGKILLed and reaped on drop, so a failing test
/// never leaves a server behind.
struct Server(Child);

impl Server {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn start(args: &[&str], socket: &Path) -> (Server, Client) {
    let child = Command::new(BIN).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(client) = Client::connect(socket) {
            return (server, client);
        }
        assert!(Instant::now() < deadline, "server did not come up");
        thread::sleep(Duration::from_millis(20));
    }
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
    assert_eq!(client.call(&["PUSH", "1", &acked, "done"]).unwrap(), Frame::Integer(1));
    let reserved = match client.call(&["FETCH", "1", "0", "0", "1"]).unwrap() {
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
    assert_eq!(client.call(&["ACK", &acked, &fence]).unwrap(), Frame::Simple(b"OK".to_vec()));

    // Producers push until the server dies; they remember what was confirmed.
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (socket, stop) = (socket.clone(), stop.clone());
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
                    match client.call(&args) {
                        Ok(Frame::Integer(10)) => confirmed.extend(ids),
                        Ok(other) => panic!("unexpected reply {other:?}"),
                        Err(_) => break, // the server was killed mid-request: not confirmed
                    }
                }
                confirmed
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(400));
    child.kill(); // SIGKILL
    stop.store(true, Ordering::Relaxed);
    let confirmed: Vec<String> = producers.into_iter().flat_map(|p| p.join().unwrap()).collect();
    assert!(confirmed.len() >= 20, "only {} jobs confirmed before the kill", confirmed.len());

    let (mut child, mut client) = start(&args, &socket);
    for id in &confirmed {
        match client.call(&["GET", id]).unwrap() {
            Frame::Array(job) => assert_eq!(job[2], Frame::Bulk(b"ready".to_vec()), "{id}"),
            other => panic!("confirmed job {id} lost after SIGKILL ({durability}): {other:?}"),
        }
    }
    match client.call(&["GET", &acked]).unwrap() {
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
    assert_eq!(client.call(&["PING"]).unwrap(), Frame::Simple(b"PONG".to_vec()));
    let status = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
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
