//! SolidEngine: the SolidJobs job server.
//!
//! Layers, one module each, each depending only on the ones above it:
//! - [`id`]: job ids.
//! - [`error`]: the crate's one error enum and its protocol error codes.
//! - [`resp`]: RESP2 framing (incremental decoder, encoder).
//! - [`engine`]: the job state machine (pure, clock passed in).
//! - [`clock`]: the server's clock (wall time at start + monotonic).
//! - [`presence`]: which worker nodes announced themselves (not job
//!   state: never logged).
//! - [`command`]: frames to typed commands, typed results to replies.
//! - [`storage`]: append-only log, snapshots, recovery.
//! - [`config`]: flags and TOML file.
//! - [`server`]: listeners, connections, auth, limits, dispatch.
//!
//! [`fuzzing`] holds the protocol property check shared by the cargo-fuzz
//! target and the stable-Rust fallback fuzzer.

pub mod clock;
pub mod command;
pub mod config;
pub mod engine;
pub mod error;
pub mod fuzzing;
pub mod id;
pub mod presence;
pub mod resp;
pub mod server;
pub mod storage;

pub use error::{Error, Result};

/// Writes one operational log line to stderr: start, recovery, compaction,
/// shutdown, failures. One line per event, prefixed for grepping.
pub fn log(message: std::fmt::Arguments<'_>) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    eprintln!("solid-engine ts={now} {message}");
}

/// Milliseconds since the Unix epoch, from the wall clock. The server's
/// engine runs on [`clock::Clock`] instead (anchored to this at start).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "se-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }

        /// A copy of the directory's files as they are now: what a process
        /// killed at this moment leaves on disk (everything written with
        /// write() is in the copy, whether fsync'd or not).
        pub fn crash_copy(&self, tag: &str) -> TempDir {
            let copy = TempDir::new(tag);
            for entry in std::fs::read_dir(&self.0).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_file() {
                    std::fs::copy(entry.path(), copy.0.join(entry.file_name())).unwrap();
                }
            }
            copy
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
