//! Snapshot files: every retained job, written so that a crash at any
//! moment leaves either the old snapshot or the new one, never a mix.
//!
//! Steps: write `snapshot.tmp` (magic, meta, jobs, end record), fsync it,
//! rename it over `snapshot`, fsync the directory. The meta record names
//! the log generation that continues the snapshot; recovery ignores (and
//! deletes) older logs, so records already in the snapshot are never
//! replayed twice.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;

use super::log::sync_dir;
use super::record::{encode_end, encode_job, encode_meta};
use super::CompactionStep;
use crate::engine::JobImage;
use crate::error::Result;

pub const SNAPSHOT_FILE: &str = "snapshot";
pub const SNAPSHOT_TMP: &str = "snapshot.tmp";
pub const SNAPSHOT_MAGIC: &[u8; 12] = b"SOLIDSNAP\x00\x00\x01";

/// While a snapshot is written, fsync every this many bytes: tens of
/// megabytes of dirty pages flushed at once stall the server's own log
/// writes (the kernel throttles writers and the log's fsync queues behind
/// them), which the engine lock being free does not help.
const INCREMENTAL_SYNC_BYTES: u64 = 4 << 20;

/// Writes the snapshot; returns its size in bytes. `step` is told when the
/// temp file is partly written (after its first chunk) and when it is
/// complete and fsync'd (before the rename).
pub fn write_snapshot(
    dir: &Path,
    log_gen: u64,
    next_fence: u64,
    jobs: &[JobImage],
    step: &mut dyn FnMut(CompactionStep),
) -> Result<u64> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let file = File::create(&tmp)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut buf = Vec::with_capacity(64 << 10);
    buf.extend_from_slice(SNAPSHOT_MAGIC);
    encode_meta(&mut buf, next_fence, log_gen);
    let (mut size, mut synced) = (0u64, 0u64);
    for job in jobs {
        encode_job(&mut buf, job);
        if buf.len() >= 64 << 10 {
            out.write_all(&buf)?;
            if size == 0 {
                out.flush()?;
                step(CompactionStep::WritingSnapshot);
            }
            size += buf.len() as u64;
            buf.clear();
            if size - synced >= INCREMENTAL_SYNC_BYTES {
                out.flush()?;
                out.get_ref().sync_data()?;
                synced = size;
            }
        }
    }
    if size == 0 {
        // Small snapshots: half of it, so the partial state exists too.
        let half = buf.len() / 2;
        out.write_all(&buf[..half])?;
        out.flush()?;
        step(CompactionStep::WritingSnapshot);
        buf.drain(..half);
        size += half as u64;
    }
    encode_end(&mut buf, jobs.len() as u64);
    out.write_all(&buf)?;
    size += buf.len() as u64;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    step(CompactionStep::SnapshotWritten);
    fs::rename(&tmp, dir.join(SNAPSHOT_FILE))?;
    sync_dir(dir)?;
    Ok(size)
}
