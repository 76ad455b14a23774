//! A private redis-server on a free port for each test binary run.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

pub struct TempDir(pub std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How often a start is tried on a fresh port before the test fails.
const START_ATTEMPTS: usize = 5;

impl RedisServer {
    /// A free port is only free when asked: tests running at once can be
    /// handed the same one, and the second redis-server then fails to bind
    /// while the first answers for both. So a start counts only once the
    /// server answering on the port reports this child's pid; a child that
    /// exited (the port was taken) is retried on another port.
    pub fn start() -> Self {
        for _ in 0..START_ATTEMPTS {
            if let Some(server) = Self::try_start() {
                return server;
            }
        }
        panic!("redis-server did not start on any of {START_ATTEMPTS} free ports");
    }

    fn try_start() -> Option<Self> {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let n = STARTS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("solid-core-redis-{port}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (bin/test installs it)");
        let mut server = RedisServer { child, port, _dir: TempDir(dir) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if server.child.try_wait().unwrap().is_some() {
                return None;
            }
            // Another test's server may answer until ours exits for want
            // of the port; either way within the deadline.
            match server.answering_pid() {
                Some(pid) if pid == server.child.id() => return Some(server),
                _ => assert!(Instant::now() < deadline, "redis-server did not start"),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pid of whichever redis-server answers on the port.
    fn answering_pid(&self) -> Option<u32> {
        let mut conn = redis::Client::open(self.url()).ok()?.get_connection().ok()?;
        let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
        info.lines().find_map(|l| l.strip_prefix("process_id:")).and_then(|pid| pid.trim().parse().ok())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url()).unwrap().get_connection().unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
