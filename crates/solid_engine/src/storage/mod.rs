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
use std::time::{Duration, Instant};

pub use recovery::{RecoveryReport, RepairPlan};

use crate::engine::{Engine, EngineConfig, Event};
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
    /// Time spent rebuilding the state from the files (the rest of the
    /// compaction's time is writing the snapshot).
    pub rebuild_ms: u64,
}

/// The steps of a compaction, in order, for tests that park one there or
/// copy the data directory as a crash at that moment would leave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactionStep {
    /// The image of the engine's state that the snapshot holds is being
    /// built (appends already go to the new generation).
    BuildingImage,
    /// `snapshot.tmp` is partly written.
    WritingSnapshot,
    /// `snapshot.tmp` is complete and fsync'd, not yet renamed.
    SnapshotWritten,
    /// The snapshot is in place; the logs it supersedes are not yet deleted.
    SnapshotRenamed,
}

/// What [`Storage::start_compaction`] captured under the engine lock; the
/// rest of the compaction works from the files ([`Storage::finish_compaction`]).
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The generation appends switched to: the snapshot holds exactly the
    /// logs before it.
    gen: u64,
    next_fence: u64,
    /// Retention (not journaled) is judged at this time, the engine's.
    now_ms: u64,
    config: EngineConfig,
    log_bytes_before: u64,
    /// The live engine's job count: the rebuilt one's size, near enough.
    jobs: usize,
}

/// A log file created for the next generation before the engine lock is
/// taken ([`Storage::prepare_compaction`]).
pub struct PreparedLog {
    gen: u64,
    file: File,
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

    /// A compaction in three steps, so that the engine lock is held for
    /// constant work only, whatever the number of jobs (docs/decisions.md:
    /// the snapshot is rebuilt from the files, not copied from the engine).
    ///
    /// 1. Without the engine lock: creates the next generation's log file
    ///    (durably; an unused empty generation is harmless to recovery).
    ///    Also fsyncs the current log, so the fsync that step 2 does under
    ///    the lock has only what was appended since.
    pub fn prepare_compaction(&self) -> Result<PreparedLog> {
        self.sync_all()?;
        let gen = self.writer.gen() + 1;
        Ok(PreparedLog { gen, file: LogWriter::create(&self.dir, gen)? })
    }

    /// 2. Under the engine lock: writes what the engine journaled so far
    ///    into the current log, fsyncs it, and switches appends to the
    ///    prepared generation. From here the current state is exactly the
    ///    snapshot plus the logs before that generation.
    pub fn start_compaction(&self, prepared: PreparedLog, engine: &mut Engine, now_ms: u64) -> Result<Compaction> {
        let mut events = Vec::new();
        engine.take_events(&mut events);
        self.append(&events);
        if prepared.gen != self.writer.gen() + 1 {
            return Err(Error::Storage(format!("compaction prepared generation {} out of turn", prepared.gen)));
        }
        let log_bytes_before = self.writer.rotate(prepared.gen, prepared.file)?;
        Ok(Compaction {
            gen: prepared.gen,
            next_fence: engine.next_fence(),
            now_ms,
            config: engine.config().clone(),
            log_bytes_before,
            jobs: engine.job_count(),
        })
    }

    /// 3. Without the engine lock: rebuilds that state in a private engine
    ///    from the snapshot and the logs before the new generation (fsync'd,
    ///    no longer appended to), writes it as the new snapshot, then
    ///    deletes the logs it supersedes. A crash anywhere in here leaves
    ///    the old snapshot and every log, or the new snapshot and the new
    ///    generation: recovery reads either to the same state.
    pub fn finish_compaction(
        &self,
        compaction: &Compaction,
        step: &mut dyn FnMut(CompactionStep),
    ) -> Result<CompactionReport> {
        step(CompactionStep::BuildingImage);
        let mut image = Engine::new(compaction.config.clone());
        image.reserve(compaction.jobs);
        let started = Instant::now();
        let fence = recovery::rebuild(&self.dir, compaction.gen, compaction.now_ms, &mut image)?;
        let next_fence = compaction.next_fence.max(fence).max(image.next_fence());
        let jobs = image.export();
        drop(image);
        let rebuild_ms = started.elapsed().as_millis() as u64;
        let snapshot_bytes = snapshot::write_snapshot(&self.dir, compaction.gen, next_fence, &jobs, step)?;
        step(CompactionStep::SnapshotRenamed);
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            let old = name.strip_suffix(".log").and_then(|s| s.parse::<u64>().ok()).is_some_and(|g| g < compaction.gen);
            if old {
                fs::remove_file(self.dir.join(&*name))?;
            }
        }
        Ok(CompactionReport {
            jobs: jobs.len() as u64,
            snapshot_bytes,
            log_bytes_before: compaction.log_bytes_before,
            new_gen: compaction.gen,
            rebuild_ms,
        })
    }

    /// The three steps at once, for callers that own the engine (tests).
    #[cfg(test)]
    pub fn compact(&self, engine: &mut Engine, now_ms: u64) -> Result<CompactionReport> {
        let prepared = self.prepare_compaction()?;
        let compaction = self.start_compaction(prepared, engine, now_ms)?;
        self.finish_compaction(&compaction, &mut |_| {})
    }
}
