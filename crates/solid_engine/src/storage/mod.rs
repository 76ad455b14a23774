//! Durable storage: an append-only log of engine events, snapshots that
//! compact it, and recovery at start.
//!
//! Files in `data_dir`:
//! - `LOCK`: held (flock) while a server uses the directory.
//! - `<gen>.log`: header (magic, version, generation) then framed records
//!   ([`record`]). Only the newest generation is appended to.
//! - `snapshot`: every retained job plus the generation of the first log
//!   that continues it ([`snapshot`]).
//!
//! Durability modes: `balanced` confirms a change once its records were
//! written with write() (they survive a SIGKILL) and fsyncs every
//! [`BALANCED_SYNC_INTERVAL`]; `strict` confirms only after fsync, with
//! group commit.

mod log;
mod record;
mod recovery;
mod snapshot;

#[cfg(test)]
mod tests;

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use recovery::{RecoveryReport, RepairPlan};

use crate::engine::{Engine, Event, JobImage};
use crate::error::{Error, Result};
use log::{LogWriter, LOG_HEADER};

/// How often `balanced` mode fsyncs the log: a machine crash can lose at
/// most this much confirmed work.
pub const BALANCED_SYNC_INTERVAL: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Nothing is persisted; a restart loses every job.
    Memory,
    /// write() before the reply, fsync every 10 ms.
    Balanced,
    /// fsync before the reply (group commit).
    Strict,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Memory => "memory",
            Durability::Balanced => "balanced",
            Durability::Strict => "strict",
        }
    }

    pub fn parse(text: &str) -> Option<Durability> {
        match text {
            "memory" => Some(Durability::Memory),
            "balanced" => Some(Durability::Balanced),
            "strict" => Some(Durability::Strict),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    pub jobs: u64,
    pub snapshot_bytes: u64,
    pub log_bytes_before: u64,
    pub new_gen: u64,
}

/// The steps of a compaction, for tests that park or crash one there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactionStep {
    /// The image of the engine's state that the snapshot holds is being built.
    BuildingImage,
}

/// Holds `dir/LOCK` (flock) for as long as the returned file lives.
fn lock_dir(dir: &Path) -> Result<File> {
    let lock = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(TryLockError::WouldBlock) => {
            Err(Error::Config(format!("data_dir {} is in use by another server", dir.display())))
        }
        Err(TryLockError::Error(e)) => Err(e.into()),
    }
}

/// `solid-engine-server --repair`: finds the first bad record in `dir`'s
/// logs and, if `confirm` agrees, truncates there (see
/// [`recovery::repair`]). Holds the directory lock, so it never runs under
/// a live server. `None`: nothing to repair.
pub fn repair(dir: &Path, confirm: impl FnOnce(&RepairPlan) -> bool) -> Result<Option<RepairPlan>> {
    if !dir.is_dir() {
        return Err(Error::Config(format!("data_dir {} does not exist", dir.display())));
    }
    let _lock = lock_dir(dir)?;
    recovery::repair(dir, confirm)
}

pub struct Storage {
    dir: PathBuf,
    durability: Durability,
    writer: LogWriter,
    compact_threshold: u64,
    _lock: File,
}

impl Storage {
    /// Locks `dir`, rebuilds `engine` from it (snapshot + logs, torn tail
    /// truncated) and turns the engine's journal on.
    pub fn open(
        dir: &Path,
        durability: Durability,
        compact_threshold: u64,
        engine: &mut Engine,
    ) -> Result<(Storage, RecoveryReport)> {
        assert!(durability != Durability::Memory, "memory durability has no storage");
        fs::create_dir_all(dir)?;
        let lock = lock_dir(dir)?;
        let report = recovery::recover(dir, engine)?;
        let size = if report.log_size == 0 {
            LogWriter::create(dir, report.log_gen)?;
            LOG_HEADER as u64
        } else {
            report.log_size
        };
        let writer = LogWriter::open(dir, report.log_gen, size)?;
        engine.set_journal(true);
        let storage = Storage { dir: dir.to_path_buf(), durability, writer, compact_threshold, _lock: lock };
        Ok((storage, report))
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Queues the records of `events` (call under the engine lock, so log
    /// order is engine order). Returns the ticket for [`Storage::confirm`];
    /// 0 when there was nothing to write.
    pub fn append(&self, events: &[Event]) -> u64 {
        if events.is_empty() {
            return 0;
        }
        self.writer.append(events)
    }

    /// The ticket covering every record appended so far (under the engine
    /// lock: everything the engine's current state depends on).
    pub fn appended_end(&self) -> u64 {
        self.writer.appended_end()
    }

    /// Returns once the records before `ticket` are as durable as the mode
    /// promises. Call without holding the engine lock.
    pub fn confirm(&self, ticket: u64) -> Result<()> {
        if ticket == 0 {
            return Ok(());
        }
        match self.durability {
            Durability::Strict => self.writer.sync_through(ticket),
            _ => self.writer.write_through(ticket),
        }
    }

    /// Writes and fsyncs everything appended so far (periodic sync in
    /// balanced mode, and shutdown).
    pub fn sync_all(&self) -> Result<()> {
        if self.writer.dirty() {
            self.writer.sync_all()?;
        }
        Ok(())
    }

    pub fn log_bytes(&self) -> u64 {
        self.writer.file_size()
    }

    /// The log is over the threshold and more than twice the live state.
    pub fn needs_compaction(&self, live_bytes: u64) -> bool {
        let size = self.writer.file_size();
        size > self.compact_threshold && size > live_bytes.saturating_mul(2)
    }

    /// First half of a compaction, called under the engine lock right after
    /// [`Engine::export`]: switches appends to a new log generation.
    pub fn start_compaction(&self) -> Result<u64> {
        let gen = self.writer.gen() + 1;
        self.writer.rotate(gen)?;
        Ok(gen)
    }

    /// Second half, without the engine lock: writes the snapshot that the
    /// new generation continues, then deletes the logs it supersedes.
    pub fn finish_compaction(
        &self,
        gen: u64,
        next_fence: u64,
        jobs: &[JobImage],
        log_bytes_before: u64,
    ) -> Result<CompactionReport> {
        let snapshot_bytes = snapshot::write_snapshot(&self.dir, gen, next_fence, jobs)?;
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            let old = name.strip_suffix(".log").and_then(|s| s.parse::<u64>().ok()).is_some_and(|g| g < gen);
            if old {
                fs::remove_file(self.dir.join(&*name))?;
            }
        }
        Ok(CompactionReport { jobs: jobs.len() as u64, snapshot_bytes, log_bytes_before, new_gen: gen })
    }
}
