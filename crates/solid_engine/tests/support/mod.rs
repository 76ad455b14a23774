//! What the process-level tests share: a scratch directory, the server
//! process killed on drop, waiting for it to come up, and a RESP client.
//! Each test binary uses its own part of it, so an unused item here is no
//! sign of dead code.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::resp::{self, Decoder, Frame, Mode};

pub const BIN: &str = env!("CARGO_BIN_EXE_solid-engine-server");

/// How long a client waits for a reply before its read fails: long enough
/// for a loaded host, short enough that a hung server fails the test.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A fresh directory, removed on drop. Named after the test binary, the tag
/// and this process, so tests and binaries running at once never share one.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let name = format!("se-{}-{tag}-{}", env!("CARGO_CRATE_NAME"), std::process::id());
        let path = std::env::temp_dir().join(name);
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

/// The server process; SIGKILLed and reaped on drop, so a failing test
/// never leaves a server behind.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    pub fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// SIGTERM, then the exit code once it has exited (within 10 s).
    pub fn terminate(&mut self) -> Option<i32> {
        let status = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status().unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `up` until it yields, for at most 20 s (a cold start on a loaded
/// host, replaying a log).
pub fn wait_until_up<T>(mut up: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = up() {
            return value;
        }
        assert!(Instant::now() < deadline, "server did not come up");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The port of the first TCP listener the server's start line names. Tests
/// listen on port 0 and ask: a port found free and handed to the server
/// could be taken by another test first, and a port the server bound
/// itself cannot.
pub fn bound_tcp_port(log: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text.lines().find(|l| l.contains(" start version="))?;
    let listen = line.split(" listen=[").nth(1)?.split(']').next()?;
    listen.split(',').find_map(|l| l.strip_prefix("tcp://")?.rsplit(':').next()?.parse().ok())
}

/// A RESP client, over a Unix socket unless said otherwise.
pub struct Client<S = UnixStream> {
    pub stream: S,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Client<UnixStream> {
    pub fn connect(path: &Path) -> io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(Client::over(stream))
    }
}

impl Client<TcpStream> {
    pub fn connect_tcp(port: u16) -> io::Result<Client<TcpStream>> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(Client::over(stream))
    }
}

impl<S: Read + Write> Client<S> {
    fn over(stream: S) -> Client<S> {
        Client { stream, decoder: Decoder::new(Mode::Reply), buf: Vec::new() }
    }

    /// Writes one command; its reply is left for `read`.
    pub fn send(&mut self, args: &[&[u8]]) -> io::Result<()> {
        let mut out = Vec::new();
        resp::write_command(&mut out, args);
        self.stream.write_all(&out)
    }

    /// The next reply. End of stream is `UnexpectedEof`; no reply within
    /// the read timeout is `WouldBlock`.
    pub fn read(&mut self) -> io::Result<Frame> {
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let (used, frame) = self.decoder.decode(&self.buf).expect("a valid reply");
            self.buf.drain(..used);
            if let Some(frame) = frame {
                return Ok(frame);
            }
            match self.stream.read(&mut chunk)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// A command and its reply, or the error that kept it from coming.
    pub fn try_call(&mut self, args: &[&str]) -> io::Result<Frame> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args)?;
        self.read()
    }

    /// A command and its reply; panics when none comes.
    pub fn call(&mut self, args: &[&str]) -> Frame {
        self.try_call(args).unwrap_or_else(|e| panic!("no reply to {args:?}: {e}"))
    }
}
