//! The log writer: appends framed records, writes and fsyncs them with
//! group commit.
//!
//! Positions are *logical offsets*: bytes appended since the writer was
//! opened, across log generations. A ticket is the offset just past a
//! caller's records; `written` and `synced` only grow.
//!
//! Guarantees:
//! - Records reach the file in the order they were appended (appends happen
//!   under the engine lock, so file order is engine order).
//! - `write_through(t)` returns once every byte before `t` was handed to the
//!   kernel with write(): it survives the process being killed.
//! - `sync_through(t)` returns once every byte before `t` was fsync'd: it
//!   survives a machine crash. Concurrent callers share one fsync: while a
//!   leader syncs, others append; the next leader writes and syncs all of it.
//! - After a write or fsync error the writer is failed: every later call
//!   returns the error, so nothing unwritten is ever confirmed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::record;
use crate::engine::Event;
use crate::error::{Error, Result};

pub const LOG_MAGIC: &[u8; 8] = b"SOLIDLOG";
pub const FORMAT_VERSION: u32 = 1;
/// Magic, version, generation.
pub const LOG_HEADER: usize = 8 + 4 + 8;

pub fn log_path(dir: &Path, gen: u64) -> PathBuf {
    dir.join(format!("{gen:020}.log"))
}

pub fn log_header(gen: u64) -> Vec<u8> {
    let mut header = Vec::with_capacity(LOG_HEADER);
    header.extend_from_slice(LOG_MAGIC);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.extend_from_slice(&gen.to_le_bytes());
    header
}

/// fsync of a directory, so a created or renamed entry is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

struct Pending {
    buf: Vec<u8>,
    /// Logical offset just past `buf`.
    end: u64,
}

struct Current {
    file: Arc<File>,
    gen: u64,
}

pub struct LogWriter {
    pending: Mutex<Pending>,
    current: Mutex<Current>,
    /// Bytes in the current generation's file (header included).
    file_size: AtomicU64,
    written: AtomicU64,
    synced: AtomicU64,
    sync_lock: Mutex<()>,
    failure: Mutex<Option<String>>,
}

impl LogWriter {
    /// Continues the log file `gen`, which holds `size` valid bytes.
    pub fn open(dir: &Path, gen: u64, size: u64) -> Result<LogWriter> {
        let file = OpenOptions::new().append(true).open(log_path(dir, gen))?;
        Ok(LogWriter {
            pending: Mutex::new(Pending { buf: Vec::new(), end: 0 }),
            current: Mutex::new(Current { file: Arc::new(file), gen }),
            file_size: AtomicU64::new(size),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            sync_lock: Mutex::new(()),
            failure: Mutex::new(None),
        })
    }

    /// Creates the file of a new generation with its header, durably.
    pub fn create(dir: &Path, gen: u64) -> Result<File> {
        let path = log_path(dir, gen);
        let mut file = OpenOptions::new().create(true).write(true).truncate(true).open(&path)?;
        file.write_all(&log_header(gen))?;
        file.sync_all()?;
        sync_dir(dir)?;
        Ok(OpenOptions::new().append(true).open(&path)?)
    }

    pub fn gen(&self) -> u64 {
        self.current.lock().gen
    }

    pub fn file_size(&self) -> u64 {
        self.file_size.load(Ordering::Acquire)
    }

    /// Encodes the events at the end of the pending buffer; returns the
    /// ticket to confirm them with.
    pub fn append(&self, events: &[Event]) -> u64 {
        let mut pending = self.pending.lock();
        let before = pending.buf.len();
        for event in events {
            record::encode_event(&mut pending.buf, event);
        }
        pending.end += (pending.buf.len() - before) as u64;
        pending.end
    }

    /// The end of everything appended so far: a reply that reports state
    /// must not go out before this much of the log is durable.
    pub fn appended_end(&self) -> u64 {
        self.pending.lock().end
    }

    fn check(&self) -> Result<()> {
        match &*self.failure.lock() {
            Some(reason) => Err(Error::Storage(reason.clone())),
            None => Ok(()),
        }
    }

    fn fail(&self, what: &str, e: std::io::Error) -> Error {
        let reason = format!("{what}: {e}");
        crate::log(format_args!("storage failed, refusing further writes: {reason}"));
        *self.failure.lock() = Some(reason.clone());
        Error::Storage(reason)
    }

    /// Hands every byte before `ticket` to the kernel.
    pub fn write_through(&self, ticket: u64) -> Result<()> {
        if self.written.load(Ordering::Acquire) >= ticket {
            return self.check();
        }
        let current = self.current.lock();
        self.check()?;
        if self.written.load(Ordering::Acquire) >= ticket {
            return Ok(());
        }
        let (buf, end) = {
            let mut pending = self.pending.lock();
            (std::mem::take(&mut pending.buf), pending.end)
        };
        (&*current.file).write_all(&buf).map_err(|e| self.fail("write", e))?;
        self.file_size.fetch_add(buf.len() as u64, Ordering::AcqRel);
        self.written.store(end, Ordering::Release);
        // Give the (now empty) allocation back so the next batch reuses it.
        let mut pending = self.pending.lock();
        if pending.buf.is_empty() && pending.buf.capacity() < buf.capacity() && buf.capacity() <= 1 << 20 {
            let mut buf = buf;
            buf.clear();
            pending.buf = buf;
        }
        Ok(())
    }

    /// Writes and fsyncs every byte before `ticket` (group commit).
    pub fn sync_through(&self, ticket: u64) -> Result<()> {
        if self.synced.load(Ordering::Acquire) >= ticket {
            return self.check();
        }
        let _leader = self.sync_lock.lock();
        if self.synced.load(Ordering::Acquire) >= ticket {
            return self.check();
        }
        // Everything appended so far rides along with this fsync.
        let all = self.pending.lock().end;
        self.write_through(all)?;
        let (file, target) = {
            let current = self.current.lock();
            (current.file.clone(), self.written.load(Ordering::Acquire))
        };
        file.sync_data().map_err(|e| self.fail("fsync", e))?;
        self.synced.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Writes and fsyncs everything appended so far.
    pub fn sync_all(&self) -> Result<()> {
        let all = self.pending.lock().end;
        self.sync_through(all)
    }

    /// Whether bytes were written but not yet fsync'd.
    pub fn dirty(&self) -> bool {
        self.written.load(Ordering::Acquire) > self.synced.load(Ordering::Acquire)
            || !self.pending.lock().buf.is_empty()
    }

    /// Starts generation `gen`, whose file `file` the caller created with
    /// [`LogWriter::create`] beforehand (two fsyncs that need no lock):
    /// everything appended so far goes durably into the old file,
    /// everything appended from now on into the new one. The caller holds
    /// the engine lock so no append races the switch. The old file is
    /// fsync'd before anything can be written to the new one, so the new
    /// generation never holds records whose predecessors a machine crash
    /// could lose. Returns the old file's final size.
    pub fn rotate(&self, gen: u64, file: File) -> Result<u64> {
        let _leader = self.sync_lock.lock();
        let all = self.pending.lock().end;
        self.write_through(all)?;
        let mut current = self.current.lock();
        current.file.sync_data().map_err(|e| self.fail("fsync", e))?;
        self.synced.fetch_max(self.written.load(Ordering::Acquire), Ordering::AcqRel);
        *current = Current { file: Arc::new(file), gen };
        Ok(self.file_size.swap(LOG_HEADER as u64, Ordering::AcqRel))
    }
}
